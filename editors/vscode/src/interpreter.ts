// Finding a way to run the server: an interpreter (or kernel-lsp executable) the user chose, else the first of the
// Python extension's interpreter, the workspace's .venv, a `kernel-lsp` command on PATH (pipx installs one) and
// python3 on PATH that has kernel_lsp installed.
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

export interface Candidate {
  /** An interpreter ("python") or a kernel-lsp executable ("executable"). */
  kind: 'python' | 'executable';
  command: string;
  /** Where it came from, as the user would say it: "kernelLsp.server.python", "the workspace's .venv", ... */
  source: string;
}

export interface ServerLaunch {
  command: string;
  args: string[];
  candidate: Candidate;
  version: string;
}

export interface Search {
  launch?: ServerLaunch;
  /** Every candidate that was rejected, with the reason. */
  rejected: { candidate: Candidate; reason: string }[];
}

export interface CandidateSources {
  configuredPython?: string;
  configuredPath?: string;
  /** The Python extension's selected interpreter, when it is installed. */
  pythonExtension?: () => Promise<string | undefined>;
  workspaceFolders: string[];
  /** In an untrusted workspace no interpreter from inside the workspace is run. */
  trusted: boolean;
  platform?: NodeJS.Platform;
  /** The PATH searched for a `kernel-lsp` command (default: this process's). */
  pathEnv?: string;
}

/** How to install the server, for every message that says it is missing: commands that work from a clone of the
 * repository or a wheel built there (`pip wheel --no-deps .`). */
export const INSTALL_HINT =
  'Install it from a clone of its repository with `pipx install /path/to/kernel-lsp` or, in the interpreter you ' +
  'want, `python -m pip install /path/to/kernel-lsp` (a wheel built there with `pip wheel --no-deps .` works too)';

/** The first executable `name` in the folders of `pathEnv`, as an absolute path. */
export function onPath(name: string, pathEnv: string | undefined, platform: NodeJS.Platform): string | undefined {
  const windows = platform === 'win32';
  const names = windows ? [`${name}.exe`, `${name}.cmd`] : [name];
  for (const folder of (pathEnv ?? '').split(windows ? ';' : ':')) {
    if (!folder || !path.isAbsolute(folder)) {
      continue; // a relative PATH entry would resolve inside whatever folder the editor runs in
    }
    for (const file of names) {
      const full = path.join(folder, file);
      try {
        fs.accessSync(full, windows ? fs.constants.F_OK : fs.constants.X_OK);
        if (fs.statSync(full).isFile()) {
          return full;
        }
      } catch {
        // not here
      }
    }
  }
  return undefined;
}

const PROBE_TIMEOUT_MS = 15_000;

function insideAny(file: string, folders: string[]): boolean {
  const resolved = path.resolve(file);
  return folders.some((f) => {
    const rel = path.relative(path.resolve(f), resolved);
    return rel !== '' && !rel.startsWith('..') && !path.isAbsolute(rel);
  });
}

/** The candidates in the order they are tried. A configured interpreter or executable is the only candidate. */
export async function candidates(sources: CandidateSources): Promise<Candidate[]> {
  if (sources.configuredPath) {
    return [{ kind: 'executable', command: sources.configuredPath, source: 'the kernelLsp.server.path setting' }];
  }
  if (sources.configuredPython) {
    return [{ kind: 'python', command: sources.configuredPython, source: 'the kernelLsp.server.python setting' }];
  }
  const out: Candidate[] = [];
  const windows = (sources.platform ?? process.platform) === 'win32';
  if (sources.pythonExtension) {
    let selected: string | undefined;
    try {
      selected = await sources.pythonExtension();
    } catch {
      selected = undefined; // the Python extension failed to answer: the other candidates still apply
    }
    if (selected && (sources.trusted || !insideAny(selected, sources.workspaceFolders))) {
      out.push({ kind: 'python', command: selected, source: "the Python extension's selected interpreter" });
    }
  }
  if (sources.trusted) {
    for (const folder of sources.workspaceFolders) {
      const venv = windows ? path.join(folder, '.venv', 'Scripts', 'python.exe') : path.join(folder, '.venv', 'bin', 'python');
      if (fs.existsSync(venv)) {
        out.push({ kind: 'python', command: venv, source: "the workspace's .venv" });
      }
    }
  }
  const installed = onPath('kernel-lsp', sources.pathEnv ?? process.env.PATH, sources.platform ?? process.platform);
  if (installed && (sources.trusted || !insideAny(installed, sources.workspaceFolders))) {
    out.push({ kind: 'executable', command: installed, source: 'kernel-lsp on PATH' });
  }
  out.push({ kind: 'python', command: windows ? 'python' : 'python3', source: 'PATH' });
  const seen = new Set<string>();
  return out.filter((c) => !seen.has(c.command) && seen.add(c.command));
}

function run(command: string, args: string[]): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(command, args, { timeout: PROBE_TIMEOUT_MS, windowsHide: true }, (error, stdout, stderr) => {
      if (error) {
        const detail = (stderr || '').trim().split('\n').pop() || error.message;
        reject(new Error(detail));
      } else {
        resolve({ stdout: String(stdout), stderr: String(stderr) });
      }
    });
  });
}

/** Whether a candidate can run the server: its kernel-lsp version, or why not. */
export async function probe(candidate: Candidate): Promise<{ version: string } | { reason: string }> {
  try {
    if (candidate.kind === 'executable') {
      const { stdout } = await run(candidate.command, ['--version']);
      return { version: stdout.trim().replace(/^kernel-lsp\s+/, '') };
    }
    const { stdout } = await run(candidate.command, ['-P', '-c', 'import kernel_lsp; print(kernel_lsp.__version__)']);
    return { version: stdout.trim() };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    if (/ENOENT/.test(message)) {
      return { reason: 'not found' };
    }
    if (/No module named '?kernel_lsp/.test(message)) {
      return { reason: 'kernel-lsp is not installed there' };
    }
    return { reason: message };
  }
}

export function launchOf(candidate: Candidate, version: string): ServerLaunch {
  const args = candidate.kind === 'executable' ? ['serve'] : ['-P', '-m', 'kernel_lsp', 'serve'];
  return { command: candidate.command, args, candidate, version };
}

/** Tries the candidates in order; the first that has kernel-lsp runs the server. */
export async function findServer(
  list: Candidate[],
  check: (c: Candidate) => Promise<{ version: string } | { reason: string }> = probe,
): Promise<Search> {
  const rejected: Search['rejected'] = [];
  for (const candidate of list) {
    const result = await check(candidate);
    if ('version' in result) {
      return { launch: launchOf(candidate, result.version), rejected };
    }
    rejected.push({ candidate, reason: result.reason });
  }
  return { rejected };
}

/** The error shown when no candidate has kernel-lsp. */
export function notFoundMessage(search: Search): string {
  const tried = search.rejected.map((r) => `${r.candidate.command} (${r.candidate.source}): ${r.reason}`).join('; ');
  return 'kernel-lsp: no Python interpreter with kernel-lsp installed and no kernel-lsp command on PATH was found' +
    (tried ? ` (tried ${tried})` : '') + `. ${INSTALL_HINT}, or choose an interpreter that has it.`;
}
