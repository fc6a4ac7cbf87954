// The server logs to stderr as "<date> <time>,<ms> LEVEL logger: message"; each line goes to the output channel at
// its level (the channel adds its own time). Lines without that prefix (tracebacks) keep the previous line's level.
import type * as stream from 'node:stream';
import * as readline from 'node:readline';
import type { LogOutputChannel } from 'vscode';

const LINE = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[,.]\d+ (DEBUG|INFO|WARNING|ERROR|CRITICAL) (.*)$/;

type Level = 'debug' | 'info' | 'warn' | 'error';
const LEVELS: Record<string, Level> = { DEBUG: 'debug', INFO: 'info', WARNING: 'warn', ERROR: 'error', CRITICAL: 'error' };

export function serverLogLine(line: string, previous: Level): { level: Level; text: string } {
  const m = LINE.exec(line);
  return m ? { level: LEVELS[m[1]], text: m[2] } : { level: previous, text: line };
}

export function pipeServerLog(input: stream.Readable, channel: LogOutputChannel): void {
  let level: Level = 'info';
  readline.createInterface({ input, crlfDelay: Infinity, terminal: false, historySize: 0 }).on('line', (line) => {
    const parsed = serverLogLine(line, level);
    level = parsed.level;
    channel[parsed.level](parsed.text);
  });
}
