// kernel-lsp for VS Code: starts the language server, contributes its settings and commands, shows its state.
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as vscode from 'vscode';
import {
  DidChangeConfigurationNotification,
  LanguageClient,
  State,
  type LanguageClientOptions,
  type ServerOptions,
} from 'vscode-languageclient/node';

import {
  COMPARE_IR, IR_STAGES, REFINE, advertised, commandArguments, comparisonOf, errorOf, execute, formatTable,
  positionArgument, proposalOf, tableOf,
} from './commands';
import { INSTALL_HINT, candidates, findServer, notFoundMessage, probe, type ServerLaunch } from './interpreter';
import { pipeServerLog } from './log';
import { readManifest, SECTION, type Manifest, type ServerCommand } from './manifest';
import { configurationAnswer, serverSettings } from './settings';
import { formatStatus, StatusIndicator, type Status } from './status';

export const STATUS = 'kernel-lsp.status';
const CHOOSE_INTERPRETER = 'Choose interpreter';
const SHOW_LOG = 'Show log';
const STATUS_POLL_MS = 500;
/** `kernel-lsp report` compiles, checks and times every kernel of the folder: minutes on a large one. */
const REPORT_TIMEOUT_MS = 15 * 60_000;
const STATUS_POLL_LIMIT = 120;

async function pythonExtensionInterpreter(resource: vscode.Uri | undefined): Promise<string | undefined> {
  const extension = vscode.extensions?.getExtension('ms-python.python');
  if (!extension) {
    return undefined;
  }
  const api: any = extension.isActive ? extension.exports : await extension.activate();
  const environment = api?.environments?.getActiveEnvironmentPath?.(resource);
  if (environment?.path) {
    return environment.path;
  }
  return api?.settings?.getExecutionDetails?.(resource)?.execCommand?.[0];
}

export class KernelLspExtension implements vscode.Disposable {
  client: LanguageClient | undefined;
  launch: ServerLaunch | undefined;
  readonly indicator: StatusIndicator;
  private readonly disposables: vscode.Disposable[] = [];
  private polling: ReturnType<typeof setTimeout> | undefined;

  constructor(readonly manifest: Manifest, readonly output: vscode.LogOutputChannel) {
    this.indicator = new StatusIndicator(
      vscode.window.createStatusBarItem('kernelLsp.status', vscode.StatusBarAlignment.Left, 10),
      `${SECTION}.status`,
      () => void this.refreshStatus(),
    );
  }

  get trusted(): boolean {
    return vscode.workspace.isTrusted !== false;
  }

  /** What the server gets as its settings now. */
  settings(): Record<string, unknown> {
    return serverSettings(vscode.workspace.getConfiguration(SECTION), this.manifest.serverSettings, this.trusted);
  }

  private async findLaunch(): Promise<ServerLaunch | undefined> {
    const config = vscode.workspace.getConfiguration(SECTION);
    const folders = (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath);
    const resource = vscode.workspace.workspaceFolders?.[0]?.uri;
    const list = await candidates({
      configuredPath: config.get<string>('server.path') || undefined,
      configuredPython: config.get<string>('server.python') || undefined,
      pythonExtension: () => pythonExtensionInterpreter(resource),
      workspaceFolders: folders,
      trusted: this.trusted,
    });
    const search = await findServer(list);
    if (!search.launch) {
      const message = notFoundMessage(search);
      this.output.error(message);
      this.indicator.stopped('no interpreter with kernel-lsp installed');
      void vscode.window.showErrorMessage(message, CHOOSE_INTERPRETER, SHOW_LOG).then((choice) => {
        if (choice === CHOOSE_INTERPRETER) {
          void vscode.commands.executeCommand(`${SECTION}.chooseInterpreter`);
        } else if (choice === SHOW_LOG) {
          this.output.show(true);
        }
      });
    }
    return search.launch;
  }

  /** Finds an interpreter and starts the server; false (with a message shown) when it cannot. */
  async start(): Promise<boolean> {
    const launch = await this.findLaunch();
    if (!launch) {
      return false;
    }
    this.launch = launch;
    this.output.info(`starting ${launch.command} ${launch.args.join(' ')} (kernel-lsp ${launch.version}, from ` +
      `${launch.candidate.source})${this.trusted ? '' : ' in an untrusted workspace: compiling, checks and timing are off'}`);
    const serverOptions: ServerOptions = {
      command: launch.command,
      args: launch.args,
      options: { cwd: vscode.workspace.workspaceFolders?.[0]?.uri.fsPath },
    };
    const clientOptions: LanguageClientOptions & { stdioOptions: any } = {
      documentSelector: [{ scheme: 'file', language: 'python' }, { scheme: 'file', language: 'cuda-cpp' }],
      // VS Code's workspace trust is the server's too: in a trusted workspace it needs no prompt of its own.
      initializationOptions: { ...this.settings(), workspaceTrusted: this.trusted },
      outputChannel: this.output,
      traceOutputChannel: this.output,
      stdioOptions: {
        stdout: (input: any, channel: vscode.LogOutputChannel) => pipeServerLog(input, channel),
        stderr: (input: any, channel: vscode.LogOutputChannel) => pipeServerLog(input, channel),
      },
      middleware: {
        workspace: {
          // Only the server's own settings, and compiling forced off in an untrusted workspace.
          configuration: async (params, token, next) => {
            const answers = await next(params, token);
            return Array.isArray(answers) ? configurationAnswer(params.items, answers, () => this.settings()) : answers;
          },
        },
        handleWorkDoneProgress: (token, params, next) => {
          this.indicator.progress(token, params);
          next(token, params);
        },
      },
    };
    const client = new LanguageClient(SECTION, 'kernel-lsp', serverOptions, clientOptions);
    this.client = client;
    client.onDidChangeState((e) => {
      if (e.newState === State.Stopped && this.client === client) {
        this.indicator.stopped('the server stopped (see the kernel-lsp output)');
      }
    });
    try {
      await client.start();
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      this.indicator.stopped(reason);
      this.output.error(`kernel-lsp failed to start: ${reason}`);
      void vscode.window.showErrorMessage(`kernel-lsp failed to start: ${reason}`, SHOW_LOG).then((choice) => {
        if (choice === SHOW_LOG) {
          this.output.show(true);
        }
      });
      return false;
    }
    this.pollStatus(0);
    return true;
  }

  async stop(): Promise<void> {
    if (this.polling) {
      clearTimeout(this.polling);
      this.polling = undefined;
    }
    const client = this.client;
    this.client = undefined;
    if (client && client.state !== State.Stopped) {
      await client.stop();
    }
  }

  async restart(): Promise<boolean> {
    await this.stop();
    return this.start();
  }

  /** Asks the server for its status while it indexes the workspace, so the status bar follows. */
  private pollStatus(count: number): void {
    this.polling = undefined;
    void this.refreshStatus().then((status) => {
      if (status && (status.indexing || !status.ready) && count < STATUS_POLL_LIMIT && this.client) {
        this.polling = setTimeout(() => this.pollStatus(count + 1), STATUS_POLL_MS);
      }
    });
  }

  async refreshStatus(): Promise<Status | undefined> {
    const client = this.client;
    if (!client || !client.isRunning()) {
      return undefined;
    }
    try {
      const status = (await execute(client, STATUS, [])) as Status;
      if (status && typeof status === 'object') {
        this.indicator.status(status);
      }
      return status;
    } catch (error) {
      this.output.warn(`kernel-lsp status failed: ${error instanceof Error ? error.message : String(error)}`);
      return undefined;
    }
  }

  private running(): LanguageClient | undefined {
    if (this.client?.isRunning()) {
      return this.client;
    }
    void vscode.window.showWarningMessage('kernel-lsp is not running: open a Python file, or see the kernel-lsp output');
    return undefined;
  }

  /** A palette command: runs the server command with its argument and shows what came back. */
  async runServerCommand(command: ServerCommand): Promise<unknown> {
    const client = this.running();
    if (!client) {
      return undefined;
    }
    if (!advertised(client).includes(command.server)) {
      void vscode.window.showWarningMessage(`kernel-lsp: this server does not offer "${command.title}" ` +
        `(${command.server}); update kernel-lsp where it runs`);
      return undefined;
    }
    const args = commandArguments(command.argument, client, vscode.window.activeTextEditor);
    if (!Array.isArray(args)) {
      void vscode.window.showWarningMessage(`kernel-lsp: ${command.title}: ${args.reason}`);
      return undefined;
    }
    let result: unknown;
    try {
      result = await execute(client, command.server, args);
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      void vscode.window.showErrorMessage(`kernel-lsp: ${command.title} failed: ${reason}`);
      return undefined;
    }
    const error = errorOf(result);
    const offered = proposalOf(result);
    const table = tableOf(result);
    if (table) { // what a search tried: in the output channel (a proposal's also opens beside its preview)
      this.output.info(`${command.title}: ${error ?? offered?.proposal.summary ?? ''}\n${formatTable(table)}`);
    }
    if (error !== undefined) {
      void vscode.window.showErrorMessage(`kernel-lsp: ${command.title}: ${error}`, ...(table ? [SHOW_LOG] : []))
        .then((choice) => { if (choice === SHOW_LOG) this.output.show(true); });
    } else if (offered) {
      await this.preview(client, offered.proposal, offered.delivered);
    } else if (command.server === STATUS && result && typeof result === 'object') {
      this.indicator.status(result as Status);
      this.output.info(`status\n${formatStatus(result as Status)}`);
      this.output.show(true);
    } else if (result !== null && result !== undefined) {
      this.output.info(`${command.server}: ${JSON.stringify(result)}`);
    }
    return result;
  }

  /** A proposal goes through VS Code's refactor preview (its change annotations need confirmation): the server has
   * already sent it as workspace/applyEdit, or it is applied here, which opens the same preview. */
  async preview(client: LanguageClient, proposal: { title: string; summary: string; edit: unknown },
    delivered: boolean): Promise<void> {
    this.output.info(`${proposal.title}: ${proposal.summary}`);
    if (!delivered) {
      const edit = await client.protocol2CodeConverter.asWorkspaceEdit(proposal.edit as Parameters<
        typeof client.protocol2CodeConverter.asWorkspaceEdit>[0]);
      if (edit) {
        await vscode.workspace.applyEdit(edit, { isRefactoring: true });
      }
    }
    void vscode.window.showInformationMessage(`kernel-lsp: ${proposal.title}: ${proposal.summary}`);
  }

  /** Compare IR: asks for the stage and each side's values (and, for side B, another Python whose triton compiles
   * it), has the server compile the kernel under the cursor both ways, and opens the two IR documents in the diff
   * editor at the instructions of the cursor's line. */
  async compareIR(command: ServerCommand): Promise<unknown> {
    const client = this.running();
    if (!client) {
      return undefined;
    }
    const editor = vscode.window.activeTextEditor;
    if (!editor) {
      void vscode.window.showWarningMessage('kernel-lsp: Compare IR: put the cursor in a Triton kernel first');
      return undefined;
    }
    const stage = await vscode.window.showQuickPick(IR_STAGES, { title: 'kernel-lsp: Compare IR', placeHolder:
      'the IR to compare' });
    if (!stage) {
      return undefined;
    }
    const ask = (side: string, prompt: string) => vscode.window.showInputBox({ title: `kernel-lsp: Compare IR, ${side}`,
      prompt, ignoreFocusOut: true });
    const a = await ask('side A', 'NAME=VALUE,... (constexprs, num_warps, num_stages), e.g. BLOCK_M=64,num_warps=4; ' +
      "empty: the kernel's first configuration");
    if (a === undefined) {
      return undefined;
    }
    const b = await ask('side B', 'NAME=VALUE,... e.g. BLOCK_M=128,num_warps=8; empty: the same as A, to compare ' +
      'two triton versions');
    if (b === undefined) {
      return undefined;
    }
    const bPython = await ask('side B', 'a Python interpreter whose triton compiles side B (empty: the server\'s own)');
    if (bPython === undefined) {
      return undefined;
    }
    const args = { ...positionArgument(client, editor), stage, a, b: b.trim() ? b : a,
      ...(bPython.trim() ? { bPython: bPython.trim() } : {}) };
    let result: unknown;
    try {
      result = await execute(client, COMPARE_IR, [args]);
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      void vscode.window.showErrorMessage(`kernel-lsp: ${command.title} failed: ${reason}`);
      return undefined;
    }
    const error = errorOf(result);
    const compared = comparisonOf(result);
    if (error !== undefined || !compared) {
      void vscode.window.showErrorMessage(`kernel-lsp: ${command.title}: ${error ?? 'the server sent no IR'}`);
      return result;
    }
    const first = compared.a.lines[0];
    const selection = first === undefined ? undefined : new vscode.Range(first, 0, first, 0);
    await vscode.commands.executeCommand('vscode.diff', vscode.Uri.file(compared.a.path),
      vscode.Uri.file(compared.b.path), `${compared.kernel} ${compared.stage}: A ${compared.a.description} ↔ ` +
      `B ${compared.b.description}`, { preview: false, selection });
    return result;
  }

  /** Asks for a follow-up instruction and sends it with the cursor's place to the server's refine command. */
  async refineProposal(): Promise<unknown> {
    const client = this.running();
    if (!client) {
      return undefined;
    }
    if (!advertised(client).includes(REFINE)) {
      void vscode.window.showInformationMessage(
        `kernel-lsp: this server does not offer refining proposals (no ${REFINE} command)`);
      return undefined;
    }
    const editor = vscode.window.activeTextEditor;
    if (!editor) {
      void vscode.window.showWarningMessage('kernel-lsp: put the cursor in the kernel whose proposal to refine');
      return undefined;
    }
    const instruction = await vscode.window.showInputBox({
      title: 'kernel-lsp: refine the proposal',
      prompt: 'What should change in the proposed edit? (for example "keep BLOCK_SIZE at 128")',
      ignoreFocusOut: true,
    });
    if (!instruction?.trim()) {
      return undefined;
    }
    try {
      const result = await execute(client, REFINE, [{ ...positionArgument(client, editor), instruction: instruction.trim() }]);
      const error = errorOf(result);
      const offered = proposalOf(result);
      if (error !== undefined) {
        void vscode.window.showErrorMessage(`kernel-lsp: refine: ${error}`);
      } else if (offered) {
        await this.preview(client, offered.proposal, offered.delivered);
      }
      return result;
    } catch (error) {
      void vscode.window.showErrorMessage(`kernel-lsp: refine failed: ${error instanceof Error ? error.message : String(error)}`);
      return undefined;
    }
  }

  /** `kernel-lsp report` on the first workspace folder, with the server's interpreter, shown in a webview: the
   * same self-contained page the command line writes (its charts need scripts). Returns the page's file. */
  async showReport(): Promise<string | undefined> {
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    if (!this.launch || !folder) {
      void vscode.window.showWarningMessage(!folder ? 'kernel-lsp: the report needs an open folder.'
        : 'kernel-lsp: the server is not running, so there is no interpreter to write the report with.');
      return undefined;
    }
    if (!this.trusted) {
      void vscode.window.showWarningMessage('kernel-lsp: the report checks and times the kernels, which runs this ' +
        "folder's code: trust the workspace first.");
      return undefined;
    }
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'kernel-lsp-report-')), 'report.html');
    // Trusted (checked above): the checks and timing are asked for by name, as the command line requires.
    const args = [...this.launch.args.slice(0, -1), 'report', folder, '-o', file, '--quiet', '--run-checks'];
    this.output.info(`report: ${this.launch.command} ${args.join(' ')}`);
    this.indicator.progress('kernel-lsp.report', { kind: 'begin', title: 'writing the report' });
    try {
      await new Promise<void>((resolve, reject) => {
        execFile(this.launch!.command, args, { cwd: folder, timeout: REPORT_TIMEOUT_MS, windowsHide: true,
          maxBuffer: 16 * 1024 * 1024 }, (error, _stdout, stderr) => {
          if (error || !fs.existsSync(file)) {
            reject(new Error(String(stderr).trim().split('\n').pop() || error?.message || 'no report was written'));
          } else {
            resolve();
          }
        });
      });
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      this.output.error(`report: ${message}`);
      void vscode.window.showErrorMessage(`kernel-lsp: the report failed: ${message}`, SHOW_LOG)
        .then((choice) => choice === SHOW_LOG && this.output.show(true));
      return undefined;
    } finally {
      this.indicator.progress('kernel-lsp.report', { kind: 'end' });
    }
    const panel = vscode.window.createWebviewPanel('kernelLsp.report', `kernel-lsp report: ${path.basename(folder)}`,
      vscode.ViewColumn.Active, { enableScripts: true });
    panel.webview.html = fs.readFileSync(file, 'utf8');
    return file;
  }

  /** Picks an interpreter file, checks that it has kernel-lsp, saves it in the user settings and restarts. */
  async chooseInterpreter(): Promise<boolean> {
    const picked = await vscode.window.showOpenDialog({
      canSelectFiles: true,
      canSelectFolders: false,
      canSelectMany: false,
      openLabel: 'Use this interpreter for kernel-lsp',
      title: 'A Python interpreter that has kernel-lsp installed',
    });
    const file = picked?.[0]?.fsPath;
    if (!file) {
      return false;
    }
    const result = await probe({ kind: 'python', command: file, source: 'your choice' });
    if ('reason' in result) {
      void vscode.window.showErrorMessage(`kernel-lsp: ${file} cannot run the server: ${result.reason}. ` +
        `${INSTALL_HINT}, or choose another interpreter.`, CHOOSE_INTERPRETER)
        .then((choice) => choice === CHOOSE_INTERPRETER && this.chooseInterpreter());
      return false;
    }
    await vscode.workspace.getConfiguration(SECTION).update('server.python', file, vscode.ConfigurationTarget.Global);
    return this.restart();
  }

  /** Setting changes: a new interpreter restarts the server, the server's settings are sent to it. */
  async configurationChanged(event: vscode.ConfigurationChangeEvent): Promise<void> {
    if (event.affectsConfiguration(`${SECTION}.server`)) {
      await this.restart();
    } else if (event.affectsConfiguration(SECTION) && this.client?.isRunning()) {
      await this.client.sendNotification(DidChangeConfigurationNotification.type, { settings: { [SECTION]: this.settings() } });
    }
  }

  dispose(): void {
    void this.stop();
    this.indicator.dispose();
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}

export interface KernelLspApi {
  readonly extension: KernelLspExtension;
}

export async function activate(context: vscode.ExtensionContext): Promise<KernelLspApi> {
  const manifest = readManifest(context.extension.packageJSON);
  const output = vscode.window.createOutputChannel('kernel-lsp', { log: true });
  const extension = new KernelLspExtension(manifest, output);
  context.subscriptions.push(output, extension);
  for (const command of manifest.serverCommands) {
    const run = command.server === COMPARE_IR ? () => extension.compareIR(command)
      : () => extension.runServerCommand(command);
    context.subscriptions.push(vscode.commands.registerCommand(command.command, run));
  }
  context.subscriptions.push(
    vscode.commands.registerCommand(`${SECTION}.refineProposal`, () => extension.refineProposal()),
    vscode.commands.registerCommand(`${SECTION}.chooseInterpreter`, () => extension.chooseInterpreter()),
    vscode.commands.registerCommand(`${SECTION}.restartServer`, () => extension.restart()),
    vscode.commands.registerCommand(`${SECTION}.showOutput`, () => output.show(true)),
    vscode.commands.registerCommand(`${SECTION}.showReport`, () => extension.showReport()),
    vscode.workspace.onDidChangeConfiguration((e) => extension.configurationChanged(e)),
    // Trust granted: restart with compiling allowed and the workspace's own interpreters considered.
    vscode.workspace.onDidGrantWorkspaceTrust(() => extension.restart()),
  );
  await extension.start();
  return { extension };
}

export async function deactivate(): Promise<void> {
  // The client is stopped by the extension's disposal (context.subscriptions).
}
