// A sandbox's file system: single files, listings, and whole directories.

import { NotFoundError } from "./errors.js";
import { pathOf, type RequestOptions, type Transport } from "./http.js";
import { watchFiles, type FileWatch, type WatchOptions } from "./terminal.js";
import type { FileEntry, ListFilesResponse } from "./types.js";

/** What Files needs of its sandbox. */
interface HasID {
  readonly id: string;
}

export function toBytes(data: string | Uint8Array | ArrayBuffer): Uint8Array {
  if (typeof data === "string") return new TextEncoder().encode(data);
  if (data instanceof Uint8Array) return data;
  return new Uint8Array(data);
}

/** Formats permission bits for the API ("0644"); strings pass through. */
function modeString(mode: number | string | undefined): string | undefined {
  if (mode === undefined) return undefined;
  if (typeof mode === "string") return mode;
  if (!Number.isInteger(mode) || mode < 0) throw new RangeError(`bad file mode ${mode}`);
  return (mode & 0o7777).toString(8).padStart(4, "0");
}


/** Options of Files.write. */
export interface WriteFileOptions extends RequestOptions {
  /** Permission bits, as a number (0o755) or an octal string ("0755"); default 0644. */
  mode?: number | string;
}

/** Options of Files.mkdir. */
export interface MkdirOptions extends RequestOptions {
  /** Permission bits, as a number (0o700) or an octal string ("0700"); default 0755. */
  mode?: number | string;
}

/** Options of Files.list. */
export interface ListFilesOptions extends RequestOptions {
  /** Levels to descend, 1 to 20; 1 (the default) lists the directory's own entries. */
  depth?: number;
}

/** Options of Files.remove. */
export interface RemoveOptions extends RequestOptions {
  /** Also delete a directory's contents. */
  recursive?: boolean;
}

/**
 * The file system of a sandbox. Paths are absolute or relative to
 * /workspace; operations run inside the sandbox's own mount namespace.
 */
export class Files {
  readonly #t: Transport;
  readonly #sandbox: HasID;

  /** @internal Use `sandbox.files`. */
  constructor(t: Transport, sandbox: HasID) {
    this.#t = t;
    this.#sandbox = sandbox;
  }

  #path(...segments: string[]): string {
    return pathOf("sandboxes", this.#sandbox.id, "files", ...segments);
  }

  /** Watches directory path for changes: `for await (const ev of await sbx.files.watch("src"))`. */
  watch(path: string, opts?: WatchOptions): Promise<FileWatch> {
    return watchFiles(this.#t, this.#sandbox.id, path, opts);
  }

  /** Creates or replaces the file at path (strings are written as UTF-8), creating missing parents. */
  write(path: string, data: string | Uint8Array | ArrayBuffer, opts: WriteFileOptions = {}): Promise<FileEntry> {
    return this.#t.json<FileEntry>({
      method: "PUT",
      path: this.#path(),
      query: { path, mode: modeString(opts.mode) },
      body: toBytes(data),
      signal: opts.signal,
      timeoutMs: this.#t.deadline(opts),
    });
  }

  /** The content of the file at path. */
  read(path: string, opts: RequestOptions = {}): Promise<Uint8Array> {
    return this.#t.call(
      {
        method: "GET",
        path: this.#path(),
        query: { path },
        accept: "application/octet-stream",
        signal: opts.signal,
        timeoutMs: this.#t.deadline(opts),
      },
      async (res) => new Uint8Array(await res.arrayBuffer()),
    );
  }

  /** The content of the file at path, decoded as UTF-8. */
  async readText(path: string, opts: RequestOptions = {}): Promise<string> {
    return new TextDecoder().decode(await this.read(path, opts));
  }

  /** Lists the directory at path (default /workspace). Symlinks are listed, not followed. */
  async list(path?: string, opts: ListFilesOptions = {}): Promise<FileEntry[]> {
    const d = opts.depth;
    if (d !== undefined && (!Number.isInteger(d) || d < 1 || d > 20)) {
      throw new RangeError(`depth must be an integer from 1 to 20, got ${String(d)}`);
    }
    const res = await this.#t.json<ListFilesResponse>({
      method: "GET",
      path: this.#path("list"),
      query: { path: path || undefined, depth: opts.depth || undefined },
      signal: opts.signal,
      timeoutMs: this.#t.deadline(opts),
    });
    return res.entries ?? [];
  }

  /** Describes the file at path; a missing file throws NotFoundError. */
  stat(path: string, opts: RequestOptions = {}): Promise<FileEntry> {
    return this.#t.json<FileEntry>({
      method: "GET",
      path: this.#path("stat"),
      query: { path },
      signal: opts.signal,
      timeoutMs: this.#t.deadline(opts),
    });
  }

  /** Whether something exists at path. */
  async exists(path: string, opts: RequestOptions = {}): Promise<boolean> {
    try {
      await this.stat(path, opts);
      return true;
    } catch (err) {
      if (err instanceof NotFoundError) return false;
      throw err;
    }
  }

  /** Deletes the file or empty directory at path; `recursive` also deletes a directory's contents. */
  remove(path: string, opts: RemoveOptions = {}): Promise<void> {
    return this.#t.empty({
      method: "DELETE",
      path: this.#path(),
      query: { path, recursive: opts.recursive ? "true" : undefined },
      signal: opts.signal,
      timeoutMs: this.#t.deadline(opts),
    });
  }

  /** Creates the directory at path and any missing parents. */
  mkdir(path: string, opts: MkdirOptions = {}): Promise<FileEntry> {
    return this.#t.json<FileEntry>({
      method: "POST",
      path: this.#path("mkdir"),
      query: { path, mode: modeString(opts.mode) },
      signal: opts.signal,
      timeoutMs: this.#t.deadline(opts),
    });
  }

  /**
   * Writes a whole tree: `entries` maps paths relative to `dir` ("a/b.txt")
   * to contents. Parents are created. Returns how many files were written.
   */
  async uploadDir(dir: string, entries: Record<string, string | Uint8Array>, opts: RequestOptions = {}): Promise<number> {
    checkPath("dir", dir);
    if (!entries || typeof entries !== "object") throw new TypeError("entries must map relative paths to contents");
    let n = 0;
    for (const [rel, data] of Object.entries(entries)) {
      if (rel === "" || rel.startsWith("/") || rel.split("/").includes("..")) {
        throw new RangeError(`entries: ${JSON.stringify(rel)} is not a relative path inside dir`);
      }
      await this.write(`${dir.replace(/\/+$/, "")}/${rel}`, data, opts);
      n++;
    }
    return n;
  }

  /**
   * Reads every regular file below `dir`, keyed by its path relative to
   * `dir`. Symlinks and special files are skipped.
   */
  async downloadDir(dir: string, opts: RequestOptions = {}): Promise<Map<string, Uint8Array>> {
    checkPath("dir", dir);
    const out = new Map<string, Uint8Array>();
    const walk = async (sub: string): Promise<void> => {
      const full = sub === "" ? dir : `${dir.replace(/\/+$/, "")}/${sub}`;
      for (const e of await this.list(full, opts)) {
        const rel = sub === "" ? e.name : `${sub}/${e.name}`;
        if (e.type === "dir") await walk(rel);
        else if (e.type === "file") out.set(rel, await this.read(`${dir.replace(/\/+$/, "")}/${rel}`, opts));
      }
    };
    await walk("");
    return out;
  }
}

function checkPath(name: string, v: unknown): void {
  if (typeof v !== "string" || v === "") throw new TypeError(`${name} must be a non-empty path`);
}
