// The extension's pieces that need no server: interpreter search, server log levels, and the generated manifest.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, expect, test } from 'vitest';

import { requireOut, serverPython } from './host';

const { candidates, findServer, notFoundMessage, probe } = requireOut('./interpreter.js');
const { serverLogLine } = requireOut('./log.js');
const { serverSettings } = requireOut('./settings.js');
const { readManifest } = requireOut('./manifest.js');
const { formatTable, tableOf } = requireOut('./commands.js');

const pkg = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'package.json'), 'utf8'));

function workspaceWithVenv(): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'kernel-lsp-ws-'));
  fs.mkdirSync(path.join(root, '.venv', 'bin'), { recursive: true });
  fs.writeFileSync(path.join(root, '.venv', 'bin', 'python'), '');
  return root;
}

describe('finding the interpreter', () => {
  test('the Python extension first, then the workspace .venv, then python3 on PATH', async () => {
    const root = workspaceWithVenv();
    const list = await candidates({ pythonExtension: async () => '/opt/py/bin/python', workspaceFolders: [root],
      trusted: true, platform: 'linux', pathEnv: '' });
    expect(list.map((c: any) => c.command)).toEqual(['/opt/py/bin/python', path.join(root, '.venv', 'bin', 'python'), 'python3']);
  });

  test('an untrusted workspace never runs an interpreter from inside it', async () => {
    const root = workspaceWithVenv();
    const inside = path.join(root, '.venv', 'bin', 'python');
    const list = await candidates({ pythonExtension: async () => inside, workspaceFolders: [root], trusted: false,
      platform: 'linux', pathEnv: '' });
    expect(list.map((c: any) => c.command)).toEqual(['python3']);
    // Nor a kernel-lsp command that a PATH entry finds inside it.
    const bin = path.join(root, 'bin');
    fs.mkdirSync(bin);
    fs.writeFileSync(path.join(bin, 'kernel-lsp'), '#!/bin/sh\n', { mode: 0o755 });
    const again = await candidates({ workspaceFolders: [root], trusted: false, platform: 'linux', pathEnv: bin });
    expect(again.map((c: any) => c.command)).toEqual(['python3']);
  });

  test('a configured interpreter or executable is the only candidate', async () => {
    const python = await candidates({ configuredPython: '/x/python', workspaceFolders: [], trusted: true });
    expect(python).toEqual([{ kind: 'python', command: '/x/python', source: 'the kernelLsp.server.python setting' }]);
    const exe = await candidates({ configuredPath: '/x/kernel-lsp', configuredPython: '/x/python', workspaceFolders: [],
      trusted: true });
    expect(exe.map((c: any) => [c.kind, c.command])).toEqual([['executable', '/x/kernel-lsp']]);
  });

  test('a failing Python extension does not stop the search', async () => {
    const list = await candidates({ pythonExtension: async () => { throw new Error('not ready'); },
      workspaceFolders: [], trusted: true, platform: 'linux', pathEnv: '' });
    expect(list.map((c: any) => c.command)).toEqual(['python3']);
  });

  test('a kernel-lsp command on PATH (a pipx install) runs the server when python3 lacks kernel-lsp', async () => {
    const bin = fs.mkdtempSync(path.join(os.tmpdir(), 'kernel-lsp-pipx-'));
    const exe = path.join(bin, 'kernel-lsp');
    fs.writeFileSync(exe, `#!/bin/sh\nexec '${serverPython()}' -P -m kernel_lsp "$@"\n`, { mode: 0o755 });
    const list = await candidates({ workspaceFolders: [], trusted: true, platform: 'linux',
      pathEnv: `relative/bin:${bin}` });
    expect(list.map((c: any) => [c.kind, c.command, c.source])).toEqual([
      ['executable', exe, 'kernel-lsp on PATH'], ['python', 'python3', 'PATH']]);
    const bare = { kind: 'python', command: '/nonexistent/python3', source: 'PATH' };
    const search = await findServer([bare, list[0]]);
    expect(search.launch.command).toBe(exe);
    expect(search.launch.args).toEqual(['serve']);
    expect(search.launch.version).toMatch(/^\d+\.\d+/);
  });

  test('the message for a missing server gives install commands that work without a package index entry', () => {
    const message = notFoundMessage({ rejected: [{ candidate: { kind: 'python', command: 'python3', source: 'PATH' },
      reason: 'kernel-lsp is not installed there' }] });
    expect(message).toContain('pipx install /path/to/kernel-lsp');
    expect(message).toContain('python -m pip install /path/to/kernel-lsp');
    expect(message).not.toMatch(/pip install kernel-lsp\b/);
  });

  test('the first candidate that has kernel-lsp runs the server; the others say why not', async () => {
    const missing = { kind: 'python', command: '/nonexistent/python', source: 'test' };
    const plain = { kind: 'python', command: process.execPath, source: 'node pretending' };
    const good = { kind: 'python', command: serverPython(), source: 'the test venv' };
    const search = await findServer([missing, good]);
    expect(search.launch.command).toBe(serverPython());
    expect(search.launch.args).toEqual(['-P', '-m', 'kernel_lsp', 'serve']);
    expect(search.launch.version).toMatch(/^\d+\.\d+/);
    expect(search.rejected).toEqual([{ candidate: missing, reason: 'not found' }]);
    expect('reason' in (await probe(plain))).toBe(true);
  });
});

test('server log lines go to the output channel at their level', () => {
  expect(serverLogLine('2026-11-02 10:00:00,123 WARNING kernel_lsp.server: slow', 'info'))
    .toEqual({ level: 'warn', text: 'kernel_lsp.server: slow' });
  expect(serverLogLine('2026-11-02 10:00:00,123 ERROR kernel_lsp.features.ir: showIR failed', 'info').level).toBe('error');
  expect(serverLogLine('Traceback (most recent call last):', 'error')).toEqual({ level: 'error', text: 'Traceback (most recent call last):' });
});

test('only the server\'s settings are sent, with compiling off in an untrusted workspace', () => {
  const values: Record<string, unknown> = { compile: 'workspace', targets: ['sm_80'], 'server.python': '/x', ignore: undefined };
  const config = { get: (key: string) => values[key] };
  expect(serverSettings(config, ['compile', 'targets', 'ignore'], true)).toEqual({ compile: 'workspace', targets: ['sm_80'] });
  expect(serverSettings(config, ['compile', 'targets', 'ignore'], false)).toEqual(
    { compile: 'off', checks: 'off', latency: 'off', targets: ['sm_80'] });
});

test('package.json carries every server setting and command, as the server defines them', () => {
  const script = [
    'import json',
    'from kernel_lsp.commands import COMMANDS',
    'from kernel_lsp.settings import SETTINGS',
    'print(json.dumps({"settings": [[s.key, s.type, list(s.default) if isinstance(s.default, tuple) else s.default,',
    '  list(s.enum)] for s in SETTINGS], "commands": [[c.name, c.title, c.argument] for c in COMMANDS]}))',
  ].join('\n');
  const defined = JSON.parse(execFileSync(serverPython(), ['-c', script], { encoding: 'utf8' }));
  const manifest = readManifest(pkg);
  const properties = pkg.contributes.configuration.find((s: any) => s.id === 'kernelLsp.server-settings').properties;
  expect(manifest.serverSettings).toEqual(defined.settings.map((s: any) => s[0]));
  for (const [key, type, value, choices] of defined.settings) {
    const prop = properties[`kernelLsp.${key}`];
    expect(prop.type).toBe(type);
    expect(prop.default).toEqual(value);
    expect(prop.enum ?? []).toEqual(choices);
  }
  expect(manifest.serverCommands.map((c: any) => [c.server, c.title, c.argument])).toEqual(defined.commands);
  for (const c of manifest.serverCommands) {
    expect(pkg.activationEvents).toContain(`onCommand:${c.command}`);
  }
});

describe('proposals in command answers', () => {
  const { proposalOf } = requireOut('./commands.js');
  test('a proposal the server already sent as workspace/applyEdit is not applied a second time', () => {
    const proposal = { title: 'Optimize tiling of k', summary: 's', edit: { documentChanges: [] } };
    expect(proposalOf({ proposal, delivered: 'applyEdit' })).toEqual({ proposal, delivered: true });
    expect(proposalOf({ proposal })).toEqual({ proposal, delivered: false });
    expect(proposalOf({ error: 'no spec' })).toBeUndefined();
    expect(proposalOf(null)).toBeUndefined();
  });
});

describe('packaging', () => {
  test('vsce packages the compiled extension with its runtime dependencies, offline, and leaves sources out', () => {
    const root = path.join(__dirname, '..');
    const vsce = path.join(root, 'node_modules', '.bin', 'vsce');
    const vsix = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'kernel-lsp-vsix-')), 'kernel-lsp.vsix');
    execFileSync(vsce, ['package', '--skip-license', '--allow-missing-repository', '-o', vsix], { cwd: root, stdio: 'pipe' });
    expect(fs.statSync(vsix).size).toBeGreaterThan(100_000);
    const files = execFileSync(vsce, ['ls'], { cwd: root, encoding: 'utf8' }).split('\n').filter(Boolean);
    expect(files).toContain('out/extension.js');
    expect(files.some((f) => f.startsWith('node_modules/vscode-languageclient/'))).toBe(true);
    const own = files.filter((f) => !f.startsWith('node_modules/'));
    expect(own.filter((f) => /^(src|test)\//.test(f) || f.endsWith('.map') || f.endsWith('.ts'))).toEqual([]);
  });
});

describe('the table of what a search tried', () => {
  const rows = [['configuration', 'estimated', 'measured', 'note'], ['BLOCK_SIZE=64, num_warps=4', '56.3 µs', '-', '']];

  test('is read from an error answer and from a proposal, not from anything else', () => {
    expect(tableOf({ error: 'no tiling change proposed', table: rows })).toEqual(rows);
    expect(tableOf({ proposal: { title: 't', summary: 's', edit: {}, table: rows } })).toEqual(rows);
    expect(tableOf({ proposal: { table: [rows[0]] } })).toBeUndefined(); // a header alone
    expect(tableOf({ table: 'x' })).toBeUndefined();
    expect(tableOf(null)).toBeUndefined();
  });

  test('is written as aligned columns', () => {
    expect(formatTable(rows).split('\n')).toEqual([
      'configuration               estimated  measured  note',
      'BLOCK_SIZE=64, num_warps=4  56.3 µs    -',
    ]);
  });
});
