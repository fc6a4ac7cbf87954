// The real extension and the real vscode-languageclient against the real kernel-lsp server, in a headless VS Code.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';

import { diagnostics, openDocument, outputs, registeredCommands, requireOut, serverPython, vscode, waitFor } from './host';

const pkg = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'package.json'), 'utf8'));

// Line 7 (0-based) misspells tl.arange: the server reports TR007 there without compiling anything.
const TYPO = `import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.tl_arange_typo(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x, mask=mask)
`.replace('tl.tl_arange_typo', 'tl.arrange');

let workspace: string;
let api: any;
let context: any;

beforeAll(async () => {
  workspace = fs.mkdtempSync(path.join(os.tmpdir(), 'kernel-lsp-vscode-'));
  fs.writeFileSync(path.join(workspace, 'kernels.py'), TYPO);
  vscode.workspace.setWorkspaceFolders([{ uri: vscode.Uri.file(workspace), name: 'ws', index: 0 }]);
  const config = vscode.workspace.getConfiguration('kernelLsp');
  await config.update('server.python', serverPython(), vscode.ConfigurationTarget.Global);
  // Compiling would only slow the test down; it is what an untrusted workspace gets anyway.
  await config.update('compile', 'off', vscode.ConfigurationTarget.Global);
  openDocument(path.join(workspace, 'kernels.py'));
  context = { subscriptions: [] as { dispose(): unknown }[], extension: { packageJSON: pkg } };
  const { activate } = requireOut('./extension.js');
  api = await activate(context);
  // The status bar follows the server until its first index is complete.
  for (let i = 0; i < 200 && !(await api.extension.refreshStatus())?.ready; i++) {
    await new Promise((r) => setTimeout(r, 50));
  }
});

afterAll(async () => {
  await api?.extension.stop();
  for (const d of context?.subscriptions ?? []) d.dispose();
  fs.rmSync(workspace, { recursive: true, force: true });
});

describe('the extension with the real server', () => {
  test('starts the server through the configured interpreter and initializes', async () => {
    const client = api.extension.client;
    expect(client.isRunning()).toBe(true);
    expect(client.initializeResult.serverInfo.name).toBe('kernel-lsp');
    expect(api.extension.launch.args).toEqual(['-P', '-m', 'kernel_lsp', 'serve']);
  });

  test('diagnostics for a known rule violation arrive', async () => {
    const uri = vscode.Uri.file(path.join(workspace, 'kernels.py')).toString();
    const found = await waitFor('TR007', () => diagnostics.flatMap((c) => c.get({ toString: () => uri }) ?? [])
      .find((d: any) => String(d.code?.value ?? d.code) === 'TR007'));
    expect(found.range.start.line).toBe(7);
    expect(found.message).toMatch(/arange/);
  });

  test('the palette command runs the server\'s status and shows it; the status bar follows', async () => {
    const errors = vi.mocked(vscode.window.showErrorMessage);
    errors.mockClear();
    const status: any = await vscode.commands.executeCommand('kernelLsp.status');
    expect(status.version).toBe(api.extension.launch.version);
    expect(status.compile.mode).toBe('off');
    expect(status.roots).toEqual([workspace]);
    const log = outputs.find((o) => o.name === 'kernel-lsp')!;
    expect(log.text()).toMatch(/\[info\] status\n(.*\n)*compile:\n( {2}.*\n)* {2}mode: off\n/);
    expect(log.shown).toBeGreaterThan(0);
    expect(errors).not.toHaveBeenCalled();
    const item = api.extension.indicator.item;
    expect(item.command).toBe('kernelLsp.status');
    expect(item.text).toBe('$(chip) kernel-lsp CPU');
  });

  test('a position command sends the cursor; an error result is shown as an error', async () => {
    const editor = vscode.window.activeTextEditor;
    Object.defineProperty(editor, 'selection', { value: new vscode.Selection(7, 8, 7, 8), configurable: true });
    const errors = vi.mocked(vscode.window.showErrorMessage);
    errors.mockClear();
    const result: any = await vscode.commands.executeCommand('kernelLsp.showIR');
    // The server found the kernel at the cursor, and says why it has no IR.
    expect(result.kernel).toBe('add_kernel');
    expect(result.error).toMatch(/compiling is off/);
    expect(errors).toHaveBeenCalledWith(expect.stringMatching(/^kernel-lsp: Show IR: add_kernel has not been compiled/));
  });

  test('refining a proposal needs the cursor in a kernel before it asks for an instruction', async () => {
    const warnings = vi.mocked(vscode.window.showWarningMessage);
    const input = vi.mocked(vscode.window.showInputBox);
    warnings.mockClear();
    input.mockClear();
    const offered = api.extension.client.initializeResult.capabilities.executeCommandProvider.commands;
    expect(offered).toContain('kernel-lsp.refine');
    const editor = vscode.window.activeTextEditor;
    (vscode.window as { activeTextEditor: unknown }).activeTextEditor = undefined;
    try {
      await vscode.commands.executeCommand('kernelLsp.refineProposal');
    } finally {
      (vscode.window as { activeTextEditor: unknown }).activeTextEditor = editor;
    }
    expect(warnings).toHaveBeenCalledWith(expect.stringMatching(/put the cursor in the kernel/));
    expect(input).not.toHaveBeenCalled();
  });

  test('the client advertises what proposals and progress need', () => {
    const caps = api.extension.client.computeClientCapabilities();
    // Edits with change annotations that need confirmation open VS Code's refactor preview.
    expect(caps.workspace.workspaceEdit.changeAnnotationSupport).toEqual({ groupsOnLabel: true });
    expect(caps.workspace.applyEdit).toBe(true);
    expect(caps.window.workDoneProgress).toBe(true);
  });

  test('every command of package.json is registered, every server command is offered by the server', async () => {
    const registered = registeredCommands();
    for (const c of pkg.contributes.commands) {
      expect(registered).toContain(c.command);
    }
    const offered = api.extension.client.initializeResult.capabilities.executeCommandProvider.commands;
    for (const c of pkg.kernelLsp.serverCommands) {
      expect(offered).toContain(c.server);
    }
  });

  test('work-done progress shows in the status bar until it ends', async () => {
    const middleware = api.extension.client.clientOptions.middleware;
    const next = vi.fn();
    middleware.handleWorkDoneProgress('t1', { kind: 'begin', title: 'kernel-lsp', message: 'compiling 0/2' }, next);
    expect(api.extension.indicator.text).toBe('$(sync~spin) kernel-lsp CPU: compiling 0/2');
    middleware.handleWorkDoneProgress('t1', { kind: 'report', message: 'compiling 1/2', percentage: 50 }, next);
    expect(api.extension.indicator.text).toBe('$(sync~spin) kernel-lsp CPU: compiling 1/2');
    middleware.handleWorkDoneProgress('t1', { kind: 'end', message: 'compiled 2' }, next);
    expect(api.extension.indicator.text).toBe('$(chip) kernel-lsp CPU');
    expect(next).toHaveBeenCalledTimes(3);
  });

  test('in an untrusted workspace the server starts with compiling off, whatever the settings say', async () => {
    const config = vscode.workspace.getConfiguration('kernelLsp');
    await config.update('compile', 'workspace', vscode.ConfigurationTarget.Global);
    vscode.workspace.isTrusted = false;
    try {
      expect(await api.extension.restart()).toBe(true);
      const client = api.extension.client;
      expect(client.clientOptions.initializationOptions.compile).toBe('off');
      // The server also reads workspace/configuration after initialize, before it indexes: that answer is
      // restricted too.
      let status: any;
      for (let i = 0; i < 100 && !status?.ready; i++) {
        status = await vscode.commands.executeCommand('kernelLsp.status');
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(status.ready).toBe(true);
      expect(status.compile.mode).toBe('off');
    } finally {
      vscode.workspace.isTrusted = true;
      await config.update('compile', 'off', vscode.ConfigurationTarget.Global);
    }
  });

  test('without an interpreter that has kernel-lsp, a clear error offers to choose one', async () => {
    const config = vscode.workspace.getConfiguration('kernelLsp');
    const errors = vi.mocked(vscode.window.showErrorMessage);
    errors.mockClear();
    await config.update('server.python', path.join(workspace, 'no-such-python'), vscode.ConfigurationTarget.Global);
    try {
      expect(await api.extension.restart()).toBe(false);
      expect(errors).toHaveBeenCalledWith(
        expect.stringMatching(/no Python interpreter with kernel-lsp installed and no kernel-lsp command on PATH was found \(tried .*no-such-python \(the kernelLsp.server.python setting\): not found\)\. Install it from a clone of its repository with `pipx install/),
        'Choose interpreter', 'Show log');
      expect(api.extension.indicator.text).toBe('$(error) kernel-lsp');
    } finally {
      await config.update('server.python', serverPython(), vscode.ConfigurationTarget.Global);
    }
  });
});
