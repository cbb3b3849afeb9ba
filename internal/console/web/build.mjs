// Builds the console into ../dist (embedded into paddockd with go:embed):
// dist/index.html and dist/assets/app.{js,css}. Everything is bundled:
// the page loads nothing from another origin.
import { build } from "esbuild";
import { copyFileSync, mkdirSync, rmSync } from "node:fs";

const out = new URL("../dist/", import.meta.url).pathname;
rmSync(out + "assets", { recursive: true, force: true });
mkdirSync(out + "assets", { recursive: true });
await build({
  entryPoints: { app: "src/main.ts" },
  bundle: true,
  format: "esm",
  target: ["chrome120", "firefox120"],
  minify: true,
  sourcemap: false,
  legalComments: "eof",
  outdir: out + "assets",
  loader: { ".css": "css" },
  logLevel: "warning",
});
copyFileSync("index.html", out + "index.html");
