// Bundles page.mjs (and the packages it imports) into bundle.js for the
// browser: node build.mjs.
import { build } from "esbuild";

await build({ entryPoints: ["page.mjs"], bundle: true, format: "esm", platform: "browser", outfile: "bundle.js", logLevel: "warning" });
