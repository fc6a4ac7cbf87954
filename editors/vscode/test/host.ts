// A headless VS Code for the real vscode-languageclient: jest-mock-vscode's API with the few pieces it lacks
// (document selector matching, diagnostic collections, log output channels, a command registry), installed as the
// `vscode` module for everything loaded with require (the compiled extension and the language client).
import { createRequire } from 'node:module';
import * as path from 'node:path';
import * as fs from 'node:fs';
import Module from 'node:module';
import { createVSCodeMock, createMockTextEditor, createTextDocument } from 'jest-mock-vscode';
import { vi } from 'vitest';

const base: any = createVSCodeMock(vi);

class Disposable {
  constructor(private readonly fn: () => void = () => {}) {}
  static from(...items: { dispose(): unknown }[]): Disposable {
    return new Disposable(() => items.forEach((i) => i.dispose()));
  }
  dispose(): void {
    this.fn();
  }
}

class CancellationTokenSource {
  private readonly emitter = new base.EventEmitter();
  private cancelled = false;
  token = {
    isCancellationRequested: false,
    onCancellationRequested: this.emitter.event,
  };
  cancel(): void {
    if (!this.cancelled) {
      this.cancelled = true;
      this.token.isCancellationRequested = true;
      this.emitter.fire(undefined);
    }
  }
  dispose(): void {}
}

class CancellationError extends Error {}
class TabInputText { constructor(readonly uri: any) {} }
class TabInputTextDiff { constructor(readonly original: any, readonly modified: any) {} }
class TabInputNotebook { constructor(readonly uri: any, readonly notebookType: string) {} }
class TabInputCustom { constructor(readonly uri: any, readonly viewType: string) {} }

/** A diagnostic collection that tells the test when it changes. */
export class DiagnosticCollection {
  readonly entries = new Map<string, any[]>();
  readonly changed = new base.EventEmitter();
  constructor(readonly name: string) {}
  set(uri: any, diagnostics?: any[]): void {
    if (Array.isArray(uri)) {
      for (const [u, d] of uri) this.set(u, d);
      return;
    }
    if (diagnostics === undefined) this.entries.delete(uri.toString());
    else this.entries.set(uri.toString(), diagnostics);
    this.changed.fire(uri);
  }
  get(uri: any): any[] | undefined { return this.entries.get(uri.toString()); }
  has(uri: any): boolean { return this.entries.has(uri.toString()); }
  delete(uri: any): void { this.entries.delete(uri.toString()); this.changed.fire(uri); }
  clear(): void { this.entries.clear(); }
  forEach(cb: (uri: any, d: any[]) => void): void { for (const [u, d] of this.entries) cb(base.Uri.parse(u), d); }
  dispose(): void { this.entries.clear(); }
}

/** A log output channel that keeps its lines. */
export class OutputChannel {
  readonly lines: string[] = [];
  readonly logLevel = 2;
  readonly onDidChangeLogLevel = new base.EventEmitter().event;
  shown = 0;
  constructor(readonly name: string) {}
  private add(level: string, text: unknown): void { this.lines.push(`[${level}] ${String(text)}`); }
  append(text: string): void { this.add('raw', text); }
  appendLine(text: string): void { this.add('raw', text); }
  replace(text: string): void { this.lines.length = 0; this.add('raw', text); }
  trace(text: string): void { this.add('trace', text); }
  debug(text: string): void { this.add('debug', text); }
  info(text: string): void { this.add('info', text); }
  warn(text: string): void { this.add('warn', text); }
  error(text: unknown): void { this.add('error', text instanceof Error ? text.message : text); }
  clear(): void { this.lines.length = 0; }
  show(): void { this.shown += 1; }
  hide(): void {}
  dispose(): void {}
  text(): string { return this.lines.join('\n'); }
}

export const diagnostics: DiagnosticCollection[] = [];
export const outputs: OutputChannel[] = [];
const registry = new Map<string, (...args: any[]) => unknown>();

const vscode: any = base;
vscode.version = '1.91.0';
vscode.Disposable = Disposable;
vscode.CancellationTokenSource = CancellationTokenSource;
vscode.CancellationError = CancellationError;
vscode.TabInputText = TabInputText;
vscode.TabInputTextDiff = TabInputTextDiff;
vscode.TabInputNotebook = TabInputNotebook;
vscode.TabInputCustom = TabInputCustom;
vscode.env = { appName: 'Visual Studio Code', language: 'en', machineId: 'test', sessionId: 'test', uiKind: 1,
  openExternal: vi.fn(async () => true) };
vscode.extensions = { all: [], getExtension: vi.fn(() => undefined), onDidChange: new base.EventEmitter().event };
vscode.l10n = { t: (message: string) => message };

// Value classes jest-mock-vscode leaves out: the language client constructs and subclasses them.
function valueClass(...fields: string[]): any {
  return class {
    [key: string]: unknown;
    constructor(...args: unknown[]) {
      fields.forEach((f, i) => { this[f] = args[i]; });
    }
  };
}
const values: Record<string, string[]> = {
  InlayHint: ['position', 'label', 'kind'],
  InlayHintLabelPart: ['value'],
  Hover: ['contents', 'range'],
  ParameterInformation: ['label', 'documentation'],
  SignatureInformation: ['label', 'documentation'],
  SignatureHelp: [],
  InlineValueText: ['range', 'text'],
  InlineValueVariableLookup: ['range', 'variableName', 'caseSensitiveLookup'],
  InlineValueEvaluatableExpression: ['range', 'expression'],
  LinkedEditingRanges: ['ranges', 'wordPattern'],
  SnippetTextEdit: ['range', 'snippet'],
  InlineCompletionItem: ['insertText', 'range', 'command'],
  InlineCompletionList: ['items'],
  RelativePattern: ['base', 'pattern'],
};
for (const [name, fields] of Object.entries(values)) {
  if (vscode[name] === undefined) vscode[name] = valueClass(...fields);
}
vscode.InlayHintKind ??= { Type: 1, Parameter: 2 };
vscode.CodeActionTriggerKind ??= { Invoke: 1, Automatic: 2 };
// The client passes [edit, metadata] pairs where the server's edits carry change annotations (quick fixes do);
// jest-mock-vscode's WorkspaceEdit.set only takes plain edits.
const setEdits = vscode.WorkspaceEdit.prototype.set;
vscode.WorkspaceEdit.prototype.set = function set(uri: any, edits?: any[]) {
  if (!edits?.some((e) => Array.isArray(e))) return setEdits.call(this, uri, edits);
  for (const e of edits) {
    const [edit, metadata] = Array.isArray(e) ? e : [e, undefined];
    this._edits.push({ _type: 2, uri, edit, metadata });
  }
};

vscode.languages.match = (selector: any, document: any): number => {
  const filters = Array.isArray(selector) ? selector : [selector];
  let best = 0;
  for (const f of filters) {
    if (typeof f === 'string') {
      if (f === document.languageId || f === '*') best = Math.max(best, 10);
      continue;
    }
    if (f.language && f.language !== '*' && f.language !== document.languageId) continue;
    if (f.scheme && f.scheme !== '*' && f.scheme !== document.uri.scheme) continue;
    if (f.notebookType) continue;
    if (f.pattern) {
      const pattern = typeof f.pattern === 'string' ? f.pattern : path.join(f.pattern.baseUri?.fsPath ?? f.pattern.base, f.pattern.pattern);
      if (!path.matchesGlob(document.uri.fsPath, pattern)) continue;
    }
    best = Math.max(best, 10);
  }
  return best;
};
vscode.languages.createDiagnosticCollection = (name: string) => {
  const collection = new DiagnosticCollection(name);
  diagnostics.push(collection);
  return collection;
};
/** What the language client registered with `languages.register*Provider`, by the function's name: the tests call
 * these providers as VS Code would, through the client's middleware, to the server. */
export const providers = new Map<string, { selector: any; provider: any }[]>();
for (const key of Object.keys(vscode.languages)) {
  if (!key.startsWith('register')) continue;
  vscode.languages[key] = (selector: any, provider: any) => {
    const list = providers.get(key) ?? [];
    const entry = { selector, provider };
    list.push(entry);
    providers.set(key, list);
    return new Disposable(() => list.splice(list.indexOf(entry), 1));
  };
}

/** The providers registered through `languages.<register>` whose selector matches the document. */
export function providersFor(register: string, document: any): any[] {
  return (providers.get(register) ?? []).filter((p) => vscode.languages.match(p.selector, document) > 0)
    .map((p) => p.provider);
}
vscode.window.createOutputChannel = (name: string) => {
  const channel = new OutputChannel(name);
  outputs.push(channel);
  return channel;
};
vscode.commands.registerCommand = (id: string, handler: (...args: any[]) => unknown) => {
  if (registry.has(id)) throw new Error(`command '${id}' already exists`);
  registry.set(id, handler);
  return new Disposable(() => registry.delete(id));
};
vscode.commands.executeCommand = async (id: string, ...args: any[]) => {
  const handler = registry.get(id);
  if (!handler) throw new Error(`command '${id}' not found`);
  return handler(...args);
};
vscode.commands.getCommands = async () => [...registry.keys()];
/** What the extension opened in VS Code's diff editor (the built-in `vscode.diff` command). */
export const diffs: { left: any; right: any; title: string; options: any }[] = [];
registry.set('vscode.diff', (left: any, right: any, title: string, options: any) => {
  diffs.push({ left, right, title, options });
});
vscode.workspace.createFileSystemWatcher = () => ({
  onDidCreate: new base.EventEmitter().event,
  onDidChange: new base.EventEmitter().event,
  onDidDelete: new base.EventEmitter().event,
  dispose() {},
});
vscode.workspace.notebookDocuments = [];
vscode.workspace.onDidGrantWorkspaceTrust = new base.EventEmitter().event;

/** Webview panels the extension opened, with the HTML it gave them. */
export const webviews: { viewType: string; title: string; options: any; webview: { html: string } }[] = [];
vscode.window.createWebviewPanel = (viewType: string, title: string, _column: unknown, options: any) => {
  const panel = { viewType, title, options, webview: { html: '', cspSource: 'vscode-webview:' }, reveal() {},
    dispose() {}, onDidDispose: new base.EventEmitter().event };
  webviews.push(panel);
  return panel;
};

export function registeredCommands(): string[] {
  return [...registry.keys()];
}

// Everything loaded through require gets this object as `vscode`.
const originalLoad = (Module as any)._load;
(Module as any)._load = function load(request: string, ...rest: unknown[]) {
  return request === 'vscode' ? vscode : originalLoad.call(this, request, ...rest);
};

export { vscode };
export const requireOut = createRequire(path.join(__dirname, '..', 'out', 'extension.js'));

/** A file-backed document, open in the headless editor and shown in a tab (the client pulls diagnostics of tabs). */
export function openDocument(file: string, languageId = 'python'): any {
  const uri = vscode.Uri.file(file);
  const document = createTextDocument(uri, fs.readFileSync(file, 'utf8'), languageId);
  vscode.workspace.textDocuments.push(document);
  const tab = { input: new TabInputText(uri), label: path.basename(file), isActive: true };
  vscode.window.tabGroups.all.push({ tabs: [tab], activeTab: tab, isActive: true, viewColumn: 1 });
  const editor = createMockTextEditor(vi, document);
  vscode.window.activeTextEditor = editor;
  vscode.window.visibleTextEditors = [editor];
  return editor;
}

/** Make an open document the active editor's again, with the cursor at (line, character). */
export function showEditor(document: any, line: number, character: number): any {
  const editor = createMockTextEditor(vi, document);
  Object.defineProperty(editor, 'selection', { value: new vscode.Selection(line, character, line, character),
    configurable: true });
  vscode.window.activeTextEditor = editor;
  return editor;
}

/** The interpreter that runs the server under test. */
export function serverPython(): string {
  const repo = path.resolve(__dirname, '..', '..', '..');
  const venv = path.join(repo, '.venv', 'bin', 'python');
  if (fs.existsSync(venv)) return venv;
  return process.env.KERNEL_LSP_PYTHON || '/tmp/venv/bin/python';
}

export async function waitFor<T>(what: string, get: () => T | undefined, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = get();
    if (value !== undefined && value !== null && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
