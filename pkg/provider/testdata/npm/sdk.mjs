// The generators' shared part: load an SDK installed beside this file
// (node_modules here, see README.md), read its installed version, pin the
// clock the SDK reads, and write a provider's vectors.json.
import { readFileSync, writeFileSync } from 'node:fs';

export async function sdk(name) {
  const mod = await import(name);
  const pkg = JSON.parse(readFileSync(new URL(`./node_modules/${name}/package.json`, import.meta.url)));
  return { mod: mod.default ?? mod, version: pkg.version };
}

// load imports a module (or a package's subpath) installed here.
export const load = (specifier) => import(specifier);

// at runs fn with Date.now() pinned to ms, as the SDK's clock.
export async function at(ms, fn) {
  const real = Date.now;
  Date.now = () => ms;
  try {
    return await fn();
  } finally {
    Date.now = real;
  }
}

// judge is the SDK's verdict: true, or false when it returns false or throws.
export async function judge(fn) {
  try {
    return (await fn()) === true;
  } catch {
    return false;
  }
}

// write records the vectors next to the generator that made them.
// Each vector: name, secrets, public_url (when the scheme signs it),
// headers, body, now_ms (Intake's clock), sdk (the SDK's verdict), and,
// where Intake's verdict differs on purpose, intake and why.
export function write(generatorURL, file) {
  for (const v of file.vectors) {
    if (typeof v.sdk !== 'boolean') throw new Error(`${v.name}: no SDK verdict`);
  }
  writeFileSync(new URL('./vectors.json', generatorURL), JSON.stringify(file, null, 1) + '\n');
}
