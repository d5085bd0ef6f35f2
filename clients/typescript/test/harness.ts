// The test rig: the processor binary built from this repository
// (go build -o bin/processor ./cmd/processor), on its embedded
// nats-server, with a fresh store directory per processor. Without the
// binary the tests skip, except with CI set, where they fail.
import { spawn, spawnSync } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
/** The repository root (this file runs from clients/typescript/dist/test). */
export const repoRoot = resolve(here, "..", "..", "..", "..");
/** clients/conformance. */
export const conformanceDir = join(repoRoot, "clients", "conformance");

/** The processor binary, or undefined. */
export const processorBin = process.env.FOLDSTREAM_PROCESSOR || join(repoRoot, "bin", "processor");

/**
 * Why the suite cannot run here, or undefined. With CI set a missing
 * prerequisite is an error, so that CI never passes by skipping.
 */
export const missing: string | undefined = (() => {
  if (existsSync(processorBin)) return undefined;
  const why = `${processorBin} is missing: run make build (or set FOLDSTREAM_PROCESSOR)`;
  if (process.env.CI) throw new Error(`CI is set and the TypeScript suite cannot run: ${why}`);
  return why;
})();

/** A free TCP port on the loopback interface. */
export async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.once("error", rej);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      srv.close(() => res(typeof addr === "object" && addr ? addr.port : 0));
    });
  });
}

/** A processor on its embedded nats-server. */
export class Processor {
  readonly port: number;
  readonly store: string;
  private child: ChildProcess | undefined;
  private readonly extra: string[];
  /** The processor's output lines (JSON logs). */
  lines: string[] = [];

  private constructor(port: number, store: string, extra: string[]) {
    this.port = port;
    this.store = store;
    this.extra = extra;
  }

  /** Starts a processor with a fresh store on a free port; extra flags are appended. */
  static async start(extra: string[] = []): Promise<Processor> {
    const p = new Processor(await freePort(), mkdtempSync(join(tmpdir(), "foldstream-ts-")), extra);
    await p.restart();
    return p;
  }

  /** The NATS URL of its embedded server. */
  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  /** (Re)starts it on the same port and store, and waits until its service answers. */
  async restart(): Promise<void> {
    const args = ["--store-dir", this.store, "--embedded-port", String(this.port), "--metrics-addr", "",
      "--flush-interval", "5ms", "--log-level", "info", ...this.extra];
    const child = spawn(processorBin, args, { stdio: ["ignore", "pipe", "pipe"] });
    this.child = child;
    await new Promise<void>((res, rej) => {
      let buf = "";
      const timer = setTimeout(() => rej(new Error(`processor did not start in 60 s:\n${this.lines.slice(-20).join("\n")}`)), 60000);
      const onData = (d: Buffer) => {
        buf += d.toString();
        let i: number;
        while ((i = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, i);
          buf = buf.slice(i + 1);
          this.lines.push(line);
          if (line.includes('"event":"service_started"')) {
            clearTimeout(timer);
            res();
          }
        }
      };
      child.stdout!.on("data", onData);
      child.stderr!.on("data", onData);
      child.once("exit", (code) => {
        clearTimeout(timer);
        rej(new Error(`processor exited with ${code}:\n${this.lines.slice(-20).join("\n")}`));
      });
    });
  }

  /** Stops it (SIGTERM: a clean shutdown; SIGKILL: a crash) and waits for the exit. */
  async stop(signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((res) => child.once("exit", res));
    child.kill(signal);
    await exited;
  }

  /** Stops it and removes its store. */
  async close(): Promise<void> {
    await this.stop();
    rmSync(this.store, { recursive: true, force: true });
  }

  /** Runs a `processor <command>` against it and returns stdout. */
  cli(...args: string[]): string {
    const r = spawnSync(processorBin, [...args, "--nats-url", this.url], { encoding: "utf8", timeout: 30000 });
    if (r.status !== 0) throw new Error(`processor ${args.join(" ")}: exit ${r.status}: ${r.stderr}`);
    return r.stdout;
  }
}
