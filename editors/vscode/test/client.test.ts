// The real extension and the real vscode-languageclient against the real kernel-lsp server, in a headless VS Code.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';

import {
  diagnostics, diffs, openDocument, outputs, providersFor, registeredCommands, requireOut, serverPython, showEditor,
  vscode, waitFor, webviews,
} from './host';

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
let specced: any; // examples/vector_add.py, open in the editor: a kernel with a correctness spec

const EXAMPLE = fs.readFileSync(path.join(__dirname, '..', '..', '..', 'examples', 'vector_add.py'), 'utf8');
const KERNEL_LINE = EXAMPLE.split('\n').indexOf('def add_kernel(');

/** Ask `get` again until `done` holds of its answer (a server result that arrives after background work). */
async function until<T>(what: string, get: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 150_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await get();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

const token = () => new vscode.CancellationTokenSource().token;

beforeAll(async () => {
  workspace = fs.mkdtempSync(path.join(os.tmpdir(), 'kernel-lsp-vscode-'));
  fs.writeFileSync(path.join(workspace, 'kernels.py'), TYPO);
  fs.writeFileSync(path.join(workspace, 'vector_add.py'), EXAMPLE);
  vscode.workspace.setWorkspaceFolders([{ uri: vscode.Uri.file(workspace), name: 'ws', index: 0 }]);
  const config = vscode.workspace.getConfiguration('kernelLsp');
  await config.update('server.python', serverPython(), vscode.ConfigurationTarget.Global);
  // Compiling would only slow the test down; it is what an untrusted workspace gets anyway.
  await config.update('compile', 'off', vscode.ConfigurationTarget.Global);
  specced = openDocument(path.join(workspace, 'vector_add.py')).document;
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

  test('a quick fix comes through the client\'s code action provider', async () => {
    const document = vscode.workspace.textDocuments.find((d: any) => d.uri.fsPath.endsWith('kernels.py'));
    const uri = document.uri.toString();
    const typo = await waitFor('TR007', () => diagnostics.flatMap((c) => c.get({ toString: () => uri }) ?? [])
      .find((d: any) => String(d.code?.value ?? d.code) === 'TR007'));
    const [provider] = providersFor('registerCodeActionsProvider', document);
    const actions = await provider.provideCodeActions(document, typo.range,
      { diagnostics: [typo], only: undefined, triggerKind: 1 }, token());
    const fix = actions.find((a: any) => a.isPreferred && /arange/.test(a.title));
    expect(fix, JSON.stringify(actions.map((a: any) => a.title))).toBeDefined();
    const resolved = fix.edit ? fix : await provider.resolveCodeAction(fix, token());
    const [[, edits]] = resolved.edit.entries();
    expect(edits.map((e: any) => e.newText)).toContain('arange');
  });

  test('code lens, check, then inlay hint, lens and hover with the estimate, all through the client', async () => {
    const [lenses] = providersFor('registerCodeLensProvider', specced);
    // A lens without a command is resolved first, as VS Code does before showing it.
    const provide = async () => Promise.all((await lenses.provideCodeLenses(specced, token()) ?? []).map(
      async (l: any) => (l.command || !lenses.resolveCodeLens ? l : await lenses.resolveCodeLens(l, token()))));
    const before = await provide();
    const run = before.find((l: any) => l.range.start.line === KERNEL_LINE
      && /check against the reference/.test(l.command?.title ?? ''));
    expect(run, JSON.stringify(before.map((l: any) => [l.range.start.line, l.command?.title]))).toBeDefined();
    // VS Code runs a lens's command when it is clicked: the client forwards it to the server.
    const result: any = await vscode.commands.executeCommand(run.command.command, ...(run.command.arguments ?? []));
    expect(result.verdicts.map((v: any) => v.status)).toEqual(['correct']);

    const [hints] = providersFor('registerInlayHintsProvider', specced);
    const whole = new vscode.Range(0, 0, specced.lineCount, 0);
    const found = await until('the latency hint', () => hints.provideInlayHints(specced, whole, token()),
      (h: any) => (h ?? []).some((x: any) => x.position.line === KERNEL_LINE && /H200 est\./.test(String(
        typeof x.label === 'string' ? x.label : x.label.map((p: any) => p.value).join('')))));
    expect(found.length).toBeGreaterThan(0);

    const after = await provide();
    const titles = after.map((l: any) => l.command?.title ?? '');
    expect(titles.some((t: string) => /correct on \d+ cases/.test(t)), JSON.stringify(titles)).toBe(true);
    expect(titles.some((t: string) => /\(16777216,\) float32: ≈/.test(t)), JSON.stringify(titles)).toBe(true);

    const [hover] = providersFor('registerHoverProvider', specced);
    const shown = await hover.provideHover(specced, new vscode.Position(KERNEL_LINE, 6), token());
    const contents = Array.isArray(shown.contents) ? shown.contents : [shown.contents];
    const text = contents.map((c: any) => c.value ?? String(c)).join('\n');
    expect(text).toContain('**Latency** (estimated by the latency model, no GPU)');
    expect(text).toContain('| (16777216,) | float32 | H200 |');
  }, 200_000);

  test('the report command shows the page kernel-lsp report writes in a webview, scripts on', async () => {
    const file: string = await vscode.commands.executeCommand('kernelLsp.showReport');
    expect(file).toMatch(/report\.html$/);
    const [panel] = webviews.splice(0);
    expect(panel.viewType).toBe('kernelLsp.report');
    expect(panel.options.enableScripts).toBe(true);
    expect(panel.webview.html).toBe(fs.readFileSync(file, 'utf8'));
    // The folder's kernels with their verdicts and the roofline chart, its script inline.
    expect(panel.webview.html).toContain("<h3 id='add_kernel'>");
    expect(panel.webview.html).toContain("<span class='badge correct'>correct</span>");
    expect(panel.webview.html).toContain('Roofline on H200');
    expect(panel.webview.html).toContain('Plotly.newPlot');
  }, 600_000);

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

  test('Compare IR compiles the kernel two ways and opens both IR documents in the diff editor', async () => {
    const editor = vscode.window.activeTextEditor;
    const loadLine = EXAMPLE.split('\n').indexOf('    x = tl.load(x_ptr + offsets, mask=in_bounds)');
    showEditor(specced, loadLine, 8);
    vi.mocked(vscode.window.showQuickPick).mockResolvedValueOnce('ptx' as any);
    vi.mocked(vscode.window.showInputBox).mockResolvedValueOnce('BLOCK_SIZE=256,num_warps=4')
      .mockResolvedValueOnce('BLOCK_SIZE=1024,num_warps=8').mockResolvedValueOnce('');
    diffs.length = 0;
    try {
      const result: any = await vscode.commands.executeCommand('kernelLsp.compareIR');
      expect(result.error).toBeUndefined();
      expect(diffs).toHaveLength(1);
      const [{ left, right, title, options }] = diffs;
      expect(left.fsPath).toBe(result.a.path);
      expect(right.fsPath).toBe(result.b.path);
      expect(title).toMatch(/^add_kernel ptx: A BLOCK_SIZE=256, num_warps=4 \(triton [\d.]+\) ↔ B BLOCK_SIZE=1024, num_warps=8 /);
      // Both documents are Show IR's: under .kernel-lsp/ir/, naming the user's file, mapped back to its lines.
      for (const side of [result.a, result.b]) {
        expect(path.dirname(side.path)).toBe(path.join(workspace, '.kernel-lsp', 'ir'));
        expect(fs.readFileSync(side.path, 'utf8')).toContain('vector_add.py');
        const mapped = JSON.parse(fs.readFileSync(`${side.path}.lines.json`, 'utf8'));
        expect(side.lines.length).toBeGreaterThan(0);
        for (const l of side.lines) expect(mapped.lines[String(l)]).toContain(loadLine);
      }
      expect(options.selection.start.line).toBe(result.a.lines[0]);
      expect(fs.readFileSync(result.a.path, 'utf8')).toContain('.reqntid 128');
      expect(fs.readFileSync(result.b.path, 'utf8')).toContain('.reqntid 256');
    } finally {
      (vscode.window as { activeTextEditor: unknown }).activeTextEditor = editor;
    }
  }, 300_000);

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
