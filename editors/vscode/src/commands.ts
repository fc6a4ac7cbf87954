// Running the server's commands from the palette, and refining a proposal with a follow-up instruction.
import * as vscode from 'vscode';
import { ExecuteCommandRequest, type LanguageClient } from 'vscode-languageclient/node';

import type { ArgumentKind } from './manifest';

export const REFINE = 'kernel-lsp.refine';
export const COMPARE_IR = 'kernel-lsp.compareIR';
export const IR_STAGES = ['ttgir', 'ttir', 'llir', 'ptx', 'sass', 'amdgcn'];

/** One side of the server's Compare IR answer: its IR file and what it was compiled from. */
export interface IRSide {
  uri: string;
  path: string;
  lines: number[];
  description: string;
}

/** The two sides of a Compare IR answer, or undefined when it is not one. */
export function comparisonOf(result: unknown): { kernel: string; stage: string; a: IRSide; b: IRSide } | undefined {
  const r = result as { kernel?: unknown; stage?: unknown; a?: IRSide; b?: IRSide } | undefined;
  if (r && typeof r === 'object' && typeof r.a?.path === 'string' && typeof r.b?.path === 'string') {
    return { kernel: String(r.kernel), stage: String(r.stage), a: r.a, b: r.b };
  }
  return undefined;
}

/** The commands the running server advertises in its initialize result. */
export function advertised(client: LanguageClient | undefined): string[] {
  return client?.initializeResult?.capabilities.executeCommandProvider?.commands ?? [];
}

/** The position argument of a command: the active editor's uri and cursor, as the server takes them. */
export function positionArgument(client: LanguageClient, editor: vscode.TextEditor): Record<string, unknown> {
  const cursor = editor.selection.active;
  return {
    uri: client.code2ProtocolConverter.asUri(editor.document.uri),
    line: cursor.line,
    character: cursor.character,
  };
}

/** The arguments for a command, or the reason they cannot be made (no editor). */
export function commandArguments(
  kind: ArgumentKind,
  client: LanguageClient,
  editor: vscode.TextEditor | undefined,
): unknown[] | { reason: string } {
  if (kind === 'none') {
    return [];
  }
  if (!editor) {
    return { reason: 'open a Python file and put the cursor in a kernel first' };
  }
  if (kind === 'uri') {
    return [{ uri: client.code2ProtocolConverter.asUri(editor.document.uri) }];
  }
  if (kind === 'position') {
    return [positionArgument(client, editor)];
  }
  return { reason: `this extension cannot send a ${String(kind)} argument: update the kernel-lsp extension` };
}

/** An object result with an "error" key is the server saying why the command did nothing. */
export function errorOf(result: unknown): string | undefined {
  if (result && typeof result === 'object' && !Array.isArray(result) && 'error' in result) {
    return String((result as { error: unknown }).error);
  }
  return undefined;
}

export async function execute(client: LanguageClient, command: string, args: unknown[]): Promise<unknown> {
  return client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args });
}

/** The table ([[header...], [row...], ...]) an answer carries, e.g. the configurations a tiling search tried. */
export function tableOf(result: unknown): string[][] | undefined {
  const r = result as { table?: unknown; proposal?: { table?: unknown } } | undefined;
  const table = r && typeof r === 'object' ? (r.table ?? r.proposal?.table) : undefined;
  return Array.isArray(table) && table.length > 1 && table.every(Array.isArray) ? table as string[][] : undefined;
}

/** A table as aligned text columns, for the output channel. */
export function formatTable(rows: string[][]): string {
  const widths: number[] = [];
  for (const row of rows) {
    row.forEach((cell, i) => { widths[i] = Math.max(widths[i] ?? 0, String(cell).length); });
  }
  return rows.map((row) => row.map((cell, i) => String(cell).padEnd(widths[i])).join('  ').trimEnd()).join('\n');
}

/** A proposed change in a command's answer (the server's convert.proposal): previewed, never applied silently. */
export interface Proposal {
  title: string;
  summary: string;
  edit: unknown; // an LSP WorkspaceEdit whose change annotations need confirmation
  table?: string[][];
}

export function proposalOf(result: unknown): { proposal: Proposal; delivered: boolean } | undefined {
  if (result && typeof result === 'object' && 'proposal' in result) {
    const r = result as { proposal: Proposal; delivered?: string };
    return { proposal: r.proposal, delivered: r.delivered === 'applyEdit' };
  }
  return undefined;
}
