// The status bar item: CPU or GPU mode, and the server's work in progress.
import * as vscode from 'vscode';
import type { WorkDoneProgressBegin, WorkDoneProgressEnd, WorkDoneProgressReport } from 'vscode-languageclient/node';

export type Status = Record<string, any>;

/**
 * Where the server runs kernels. The status names it in `mode` ("cpu" or "gpu") when it has a GPU to run on;
 * without that field nothing runs on a GPU (kernels are compiled ahead of time, no GPU needed): CPU.
 */
export function modeOf(status: Status | undefined): 'CPU' | 'GPU' {
  const mode = typeof status?.mode === 'string' ? status.mode.toLowerCase() : '';
  return mode === 'gpu' ? 'GPU' : 'CPU';
}

function show(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** The status as `key: value` lines, one level of nesting indented (as the Neovim plugin shows it). */
export function formatStatus(status: Status): string {
  const lines: string[] = [];
  for (const key of Object.keys(status).sort()) {
    const value = status[key];
    if (value && typeof value === 'object' && !Array.isArray(value)) {
      lines.push(`${key}:`);
      for (const sub of Object.keys(value).sort()) {
        lines.push(`  ${sub}: ${show(value[sub])}`);
      }
    } else if (Array.isArray(value)) {
      lines.push(`${key}: ${value.map(show).join(', ')}`);
    } else {
      lines.push(`${key}: ${show(value)}`);
    }
  }
  return lines.join('\n');
}

type Progress = WorkDoneProgressBegin | WorkDoneProgressReport | WorkDoneProgressEnd;

export class StatusIndicator implements vscode.Disposable {
  private readonly work = new Map<string, { title: string; message?: string; percentage?: number }>();
  private last: Status | undefined;
  private stoppedReason: string | undefined;

  /** `onIdle` runs when the last piece of work in progress ends (to ask the server for its status again). */
  constructor(readonly item: vscode.StatusBarItem, command: string, private readonly onIdle: () => void) {
    item.command = command;
    item.name = 'kernel-lsp';
    this.render();
    item.show();
  }

  get text(): string {
    return this.item.text;
  }

  /** A `$/progress` notification of the server's work-done progress. */
  progress(token: string | number, value: Progress): void {
    const key = String(token);
    if (value.kind === 'begin') {
      this.work.set(key, { title: value.title, message: value.message, percentage: value.percentage });
    } else if (value.kind === 'report') {
      const current = this.work.get(key) ?? { title: 'kernel-lsp' };
      this.work.set(key, { ...current, message: value.message ?? current.message, percentage: value.percentage });
    } else {
      this.work.delete(key);
      if (this.work.size === 0) {
        this.onIdle();
      }
    }
    this.render();
  }

  /** The result of the server's status command. */
  status(status: Status): void {
    this.last = status;
    this.stoppedReason = undefined;
    this.render();
  }

  stopped(reason: string): void {
    this.stoppedReason = reason;
    this.work.clear();
    this.render();
  }

  private render(): void {
    const item = this.item;
    if (this.stoppedReason !== undefined) {
      item.text = '$(error) kernel-lsp';
      item.tooltip = `kernel-lsp is not running: ${this.stoppedReason}`;
      return;
    }
    const mode = modeOf(this.last);
    const busy = [...this.work.values()].map((w) => w.message ?? w.title);
    if (this.last?.indexing) {
      busy.unshift('indexing');
    }
    item.text = busy.length ? `$(sync~spin) kernel-lsp ${mode}: ${busy.join(', ')}` : `$(chip) kernel-lsp ${mode}`;
    const s = this.last;
    const lines = [`kernel-lsp${s?.version ? ' ' + s.version : ''}: ${mode} mode`];
    if (s?.indexed && typeof s.indexed === 'object') {
      lines.push(Object.entries(s.indexed).map(([k, v]) => `${k}: ${show(v)}`).join(', '));
    }
    if (s?.compile && typeof s.compile === 'object') {
      lines.push(`compile: ${s.compile.mode ?? '?'}${Array.isArray(s.compile.targets) ? ' for ' + s.compile.targets.join(', ') : ''}`);
    }
    lines.push('Click to show the full status in the output.');
    item.tooltip = lines.join('\n');
  }

  dispose(): void {
    this.item.dispose();
  }
}
