import { SECTION } from './manifest';

/** Settings that make the server run code: forced off in an untrusted workspace. */
export const UNTRUSTED_OVERRIDES: Readonly<Record<string, unknown>> = { compile: 'off', checks: 'off', latency: 'off' };

export interface ConfigurationReader {
  get<T>(key: string): T | undefined;
}

/**
 * The server's settings (initializationOptions and the `kernelLsp` section of workspace/configuration): only the
 * keys the server defines, so the extension's own settings (server.python, trace.server) never reach it.
 */
export function serverSettings(config: ConfigurationReader, keys: readonly string[], trusted: boolean):
    Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of keys) {
    const value = config.get<unknown>(key);
    if (value !== undefined && value !== null) {
      out[key] = value;
    }
  }
  return trusted ? out : { ...out, ...UNTRUSTED_OVERRIDES };
}

/** Rewrites a workspace/configuration answer: the `kernelLsp` section is replaced by the server's settings. */
export function configurationAnswer(
  items: readonly { section?: string }[],
  answers: unknown[],
  settings: () => Record<string, unknown>,
): unknown[] {
  return items.map((item, i) => (item.section === SECTION ? settings() : answers[i]));
}
