// A real inference engine for berth's tests: llama.cpp (node-llama-cpp's
// prebuilt CPU binary) behind the part of SGLang's OpenAI chat API that
// berth's session server uses.
//
//   node server.mjs --model M.gguf [--port 0] [--sequences 8] [--context 4096]
//                   [--threads 1] [--seed 1] [--name tiny-qwen3]
//
// It prints one line, {"url": "http://127.0.0.1:PORT"}, once it listens.
//
//   GET  /health                 {"status": "ok"}
//   GET  /v1/models              the model
//   POST /v1/chat/completions    input_ids in (the prompt, already rendered:
//                                messages are ignored, as SGLang ignores them
//                                when input_ids is given); sampling by
//                                temperature, top_p, top_k, min_p and seed;
//                                max_tokens (or max_completion_tokens,
//                                max_new_tokens); out: the message (content
//                                decoded without special tokens, as SGLang's
//                                skip_special_tokens does), finish_reason
//                                "stop" (an end-of-generation token, kept as
//                                the last output id) or "length", usage, and
//                                meta_info {output_token_logprobs: [[logprob,
//                                id, text]], completion_tokens, prompt_tokens,
//                                cached_tokens, finish_reason, e2e_latency,
//                                weight_version}. A logprob is the sampled
//                                token's log probability under the sampling
//                                distribution.
//
// The prefix cache: each X-SMG-Routing-Key (a session) keeps one of the
// context's sequences while it can; a turn evaluates only the prompt past
// what the sequence already holds (cached_tokens). A key without a
// sequence takes the one used least recently.
import http from "node:http";
import {parseArgs} from "node:util";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const {values: args} = parseArgs({options: {
	model: {type: "string"},
	host: {type: "string", default: "127.0.0.1"},
	port: {type: "string", default: "0"},
	sequences: {type: "string", default: "8"},
	context: {type: "string", default: "4096"},
	threads: {type: "string", default: "1"},
	seed: {type: "string", default: "1"},
	name: {type: "string", default: "tiny-qwen3"},
}});
if (!args.model) {
	console.error("usage: node server.mjs --model M.gguf [--port 0] [--sequences 8] [--context 4096] [--threads 1] [--seed 1]");
	process.exit(2);
}

const llama = await getLlama({gpu: false, build: "never", skipDownload: true, progressLogs: false, logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath: args.model});
const context = await model.createContext({
	contextSize: Number(args.context), sequences: Number(args.sequences), threads: Number(args.threads),
});
const vocabSize = model.fileInfo.metadata.tokenizer.ggml.tokens.length;
let nextSeed = Number(args.seed);

// slots are the context's sequences; a slot runs one turn at a time.
const slots = [];
for (let i = 0; i < Number(args.sequences); i++) {
	slots.push({seq: context.getSequence(), key: null, used: 0, busy: false});
}
const waiters = [];

function acquire(key) {
	return new Promise((resolve) => {
		const attempt = () => {
			let slot = slots.find((s) => s.key === key && key !== "");
			if (slot?.busy) return false; // this key's turn waits for its previous one
			if (!slot) {
				const idle = slots.filter((s) => !s.busy).sort((a, b) => a.used - b.used);
				if (idle.length === 0) return false;
				slot = idle[0];
				slot.key = key;
			}
			slot.busy = true;
			resolve(slot);
			return true;
		};
		if (!attempt()) waiters.push(attempt);
	});
}

function release(slot) {
	slot.busy = false;
	slot.used = Date.now();
	for (let i = 0; i < waiters.length; i++) {
		if (waiters[i]()) {
			waiters.splice(i, 1);
			return;
		}
	}
}

class BadRequest extends Error {}

function intField(body, names, fallback) {
	for (const n of names) {
		const v = body[n];
		if (v === undefined || v === null) continue;
		if (!Number.isInteger(v) || v < 0) throw new BadRequest(`${n} must be a non-negative integer`);
		return v;
	}
	return fallback;
}

function numField(body, name, fallback) {
	const v = body[name];
	if (v === undefined || v === null) return fallback;
	if (typeof v !== "number" || !Number.isFinite(v)) throw new BadRequest(`${name} must be a number`);
	return v;
}

// generate runs one turn on slot: the prompt past the cached prefix, then
// sampling until an end-of-generation token or maxTokens.
async function generate(slot, ids, opts) {
	const seq = slot.seq;
	let keep = seq.compareContextTokens(ids).firstDifferentIndex;
	if (keep >= ids.length) keep = ids.length - 1; // the last prompt token is evaluated again for its logits
	if (keep < seq.nextTokenIndex) await seq.eraseContextTokenRanges([{start: keep, end: seq.nextTokenIndex}]);
	const out = [];
	let finish = "length";
	if (opts.maxTokens > 0) {
		const gen = seq.evaluateWithMetadata(ids.slice(keep), {confidence: true}, {
			temperature: opts.temperature, topP: opts.topP, topK: opts.topK, minP: opts.minP, seed: opts.seed, yieldEogToken: true,
		});
		for await (const r of gen) {
			out.push([Math.log(r.confidence), r.token]);
			if (model.isEogToken(r.token)) {
				finish = "stop";
				break;
			}
			if (out.length >= opts.maxTokens) break;
		}
	}
	return {out, finish, cached: keep};
}

async function chat(body, key) {
	const ids = body.input_ids;
	if (!Array.isArray(ids) || ids.length === 0 || !ids.every((i) => Number.isInteger(i) && i >= 0 && i < vocabSize)) {
		throw new BadRequest(`input_ids must be a non-empty array of token ids below ${vocabSize}`);
	}
	if (ids.length >= context.contextSize) {
		throw new BadRequest(`The input (${ids.length} tokens) is longer than the model's context length (${context.contextSize} tokens).`);
	}
	const room = context.contextSize - ids.length;
	const opts = {
		maxTokens: Math.min(intField(body, ["max_tokens", "max_completion_tokens", "max_new_tokens"], room), room),
		temperature: numField(body, "temperature", 1),
		topP: numField(body, "top_p", 1),
		topK: Math.max(0, numField(body, "top_k", 0)), // SGLang's -1 (all) is llama.cpp's 0
		minP: numField(body, "min_p", 0),
		seed: intField(body, ["seed", "sampling_seed"], nextSeed++),
	};
	const start = performance.now();
	const slot = await acquire(key);
	let turn;
	try {
		turn = await generate(slot, ids, opts);
	} finally {
		release(slot);
	}
	const outIds = turn.out.map(([, id]) => id);
	const text = model.detokenize(turn.finish === "stop" ? outIds.slice(0, -1) : outIds, false);
	const logprobs = turn.out.map(([lp, id]) => [lp, id, model.detokenize([id], true)]);
	const n = outIds.length;
	const finishMeta = turn.finish === "stop" ? {type: "stop", matched: outIds[n - 1]} : {type: "length", length: n};
	return {
		id: `chatcmpl-${key || "none"}-${Date.now()}`,
		object: "chat.completion",
		created: Math.floor(Date.now() / 1000),
		model: body.model ?? args.name,
		choices: [{
			index: 0,
			message: {role: "assistant", content: text, reasoning_content: null, tool_calls: null},
			finish_reason: turn.finish,
			logprobs: null,
			meta_info: {
				id: `llamatest-${key}`,
				prompt_tokens: ids.length, completion_tokens: n, cached_tokens: turn.cached,
				output_token_logprobs: logprobs, finish_reason: finishMeta,
				e2e_latency: (performance.now() - start) / 1000, weight_version: args.name,
			},
		}],
		usage: {prompt_tokens: ids.length, completion_tokens: n, total_tokens: ids.length + n, prompt_tokens_details: {cached_tokens: turn.cached}},
	};
}

function send(res, status, obj) {
	const data = JSON.stringify(obj);
	res.writeHead(status, {"Content-Type": "application/json", "Content-Length": Buffer.byteLength(data)});
	res.end(data);
}

const server = http.createServer((req, res) => {
	const chunks = [];
	req.on("data", (c) => chunks.push(c));
	req.on("end", async () => {
		try {
			if (req.method === "GET" && req.url === "/health") return send(res, 200, {status: "ok"});
			if (req.method === "GET" && req.url === "/v1/models") {
				return send(res, 200, {object: "list", data: [{id: args.name, object: "model", owned_by: "berth", max_model_len: context.contextSize}]});
			}
			if (req.method !== "POST" || req.url !== "/v1/chat/completions") {
				return send(res, 404, {object: "error", message: `no route ${req.method} ${req.url}`, code: 404});
			}
			let body;
			try {
				body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
			} catch {
				throw new BadRequest("the body is not JSON");
			}
			if (body === null || typeof body !== "object") throw new BadRequest("the body is not a JSON object");
			if (body.stream === true) throw new BadRequest("stream is not supported");
			send(res, 200, await chat(body, req.headers["x-smg-routing-key"] ?? ""));
		} catch (e) {
			const status = e instanceof BadRequest ? 400 : 500;
			send(res, status, {object: "error", message: String(e?.message ?? e), code: status});
		}
	});
});
server.listen(Number(args.port), args.host, () => {
	const {address, port} = server.address();
	console.log(JSON.stringify({url: `http://${address}:${port}`}));
});
const stop = () => {
	server.closeAllConnections();
	server.close(() => process.exit(0));
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
