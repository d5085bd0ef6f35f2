// Writes src/wire.ts, the TypeScript types of every message of wire
// contract v1, from the JSON Schemas in schema/v1. It reads the part of
// JSON Schema those files use: objects with properties and required,
// arrays, const, enum, anyOf, $ref to $defs, and a property's "type"
// (which wins over the anyOf/if/then that only narrow a range).
//
//   node scripts/gen-wire.mjs           write src/wire.ts
//   node scripts/gen-wire.mjs --check   exit 1 when src/wire.ts differs
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const schemaDir = join(here, "..", "..", "..", "schema", "v1");
const out = join(here, "..", "src", "wire.ts");

// Names of nested objects that readers know from the Go client; any other
// nested object is named after its parent and property.
const names = {
  "ContextReply.summary": "SummaryLayer",
  "ContextReply.turns": "ContextTurn",
  "ContextReply.evictions": "EvictionNote",
  "ContextReply.recalled": "RecalledItem",
  "ContextReply.missing": "MissingTurns",
  "Control.config": "SessionConfig",
  "RecallResponse.results": "RecallResult",
  "SessionReply.lease": "LeaseInfo",
  "SessionReply.config": "SessionReplyConfig",
  "Memory.items": "MemoryItem",
};

const pascal = (s) => s.split(/[-_]/).map((w) => w[0].toUpperCase() + w.slice(1)).join("");
const literal = (v) => JSON.stringify(v);

function doc(text, indent) {
  if (!text) return "";
  const lines = text.replace(/\*\//g, "*\\/").split("\n");
  return `${indent}/**\n${lines.map((l) => `${indent} * ${l}`.trimEnd()).join("\n")}\n${indent} */\n`;
}

function generateFile(file) {
  const root = JSON.parse(readFileSync(join(schemaDir, file), "utf8"));
  const rootName = pascal(file.replace(/\.json$/, ""));
  const decls = [];

  function resolve(s) {
    if (s.$ref) {
      const m = /^#\/\$defs\/(.+)$/.exec(s.$ref);
      if (!m || !root.$defs?.[m[1]]) throw new Error(`${file}: unsupported $ref ${s.$ref}`);
      return { ...root.$defs[m[1]], ...s, $ref: undefined, description: s.description ?? root.$defs[m[1]].description };
    }
    return s;
  }

  function typeOf(s, name) {
    s = resolve(s);
    if (s.const !== undefined) return literal(s.const);
    if (s.enum) return s.enum.map(literal).join(" | ");
    const types = Array.isArray(s.type) ? s.type : s.type ? [s.type] : [];
    if (types.length === 0 && (s.anyOf || s.oneOf)) {
      return [...new Set((s.anyOf || s.oneOf).map((a) => typeOf({ ...a, description: undefined }, name)))].join(" | ");
    }
    return types.map((t) => {
      switch (t) {
        case "string": return "string";
        case "integer": case "number": return "number";
        case "boolean": return "boolean";
        case "null": return "null";
        case "array": {
          const item = typeOf(s.items ?? {}, name);
          return /[ |]/.test(item) ? `(${item})[]` : `${item}[]`;
        }
        case "object": {
          if (s.properties) {
            declare(name, s);
            return name;
          }
          const ap = s.additionalProperties;
          return `Record<string, ${ap && typeof ap === "object" ? typeOf(ap, name + "Value") : "unknown"}>`;
        }
        default: throw new Error(`${file}: unsupported type ${t}`);
      }
    }).join(" | ") || "unknown";
  }

  function declare(name, s) {
    const required = new Set(s.required ?? []);
    let body = "";
    for (const [prop, sub] of Object.entries(s.properties)) {
      const key = `${name === rootName ? rootName : name}.${prop}`;
      const subName = names[key] ?? name + pascal(prop);
      const r = resolve(sub);
      body += doc(r.description, "  ");
      body += `  ${prop}${required.has(prop) ? "" : "?"}: ${typeOf(sub, subName)};\n`;
    }
    decls.push(`${doc(s.description, "")}export interface ${name} {\n${body}}\n`);
  }

  if (root.type !== "object" || !root.properties) throw new Error(`${file}: expected an object schema`);
  declare(rootName, root);
  // Nested declarations were pushed before their parent: parents first.
  return `// ${file}\n\n` + decls.reverse().join("\n");
}

// The ranges of a configure's numeric settings and the named values, from
// control.json's config, so that validation before sending follows the
// schema (which go generate writes from the processor's declarations).
function settings() {
  const config = JSON.parse(readFileSync(join(schemaDir, "control.json"), "utf8")).properties.config.properties;
  const ranges = [];
  const named = {};
  for (const [key, s] of Object.entries(config)) {
    if (s.enum) {
      named[key] = s.enum.filter((v) => v !== "");
      continue;
    }
    if (s.type !== "integer" && s.type !== "number") continue;
    const r = s.anyOf ? s.anyOf.find((a) => a.const === undefined) : s;
    const exclusive = r.exclusiveMinimum !== undefined;
    ranges.push({
      key,
      integer: s.type === "integer",
      min: exclusive ? r.exclusiveMinimum : r.minimum,
      max: exclusive ? r.exclusiveMaximum : r.maximum,
      exclusive,
      zeroIsValue: !s.anyOf,
    });
  }
  return "// control.json: config\n\n" +
    "/** The range a configure accepts for a numeric setting; 0 means \"not set\" unless zeroIsValue. */\n" +
    "export interface SettingRange {\n  key: keyof SessionConfig;\n  integer: boolean;\n  min: number;\n  max: number;\n" +
    "  /** min and max themselves are outside the range. */\n  exclusive: boolean;\n  zeroIsValue: boolean;\n}\n\n" +
    "/** The numeric settings of a configure, in the schema's order. */\n" +
    `export const settingRanges: readonly SettingRange[] = [\n${ranges.map((r) => `  { ${Object.entries(r).map(([k, v]) => `${k}: ${JSON.stringify(v)}`).join(", ")} },`).join("\n")}\n];\n\n` +
    "/** The values a configure's named settings accept (besides \"\", which keeps the processor's). */\n" +
    `export const namedSettings = {\n${Object.entries(named).map(([k, v]) => `  ${k}: [${v.map((x) => JSON.stringify(x)).join(", ")}],`).join("\n")}\n} as const;\n`;
}

export function generate() {
  const files = readdirSync(schemaDir).filter((f) => f.endsWith(".json")).sort();
  return "// Code generated by scripts/gen-wire.mjs from schema/v1/*.json. DO NOT EDIT.\n" +
    "//\n// The messages of foldstream's wire contract v1, as the processor encodes\n" +
    "// and decodes them; field names are the JSON keys.\n\n" +
    files.map(generateFile).join("\n") + "\n" + settings();
}

const text = generate();
if (process.argv.includes("--check")) {
  if (readFileSync(out, "utf8") !== text) {
    console.error(`${out} is not what schema/v1 gives: run npm run gen in clients/typescript and commit src/wire.ts`);
    process.exit(1);
  }
} else {
  writeFileSync(out, text);
}
