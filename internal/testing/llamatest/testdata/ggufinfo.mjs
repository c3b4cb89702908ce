// Reads a GGUF file with node-llama-cpp's own reader (not berth's writer)
// and prints what it found as JSON: the header, the metadata (nested by
// key, as the reader nests it) and each tensor's info with its bytes, read
// at the file offset the reader computed.
//
//   node ggufinfo.mjs FILE.gguf
import {readFile} from "node:fs/promises";
import {readGgufFileInfo} from "node-llama-cpp";

const path = process.argv[2];
const info = await readGgufFileInfo(path, {readTensorInfo: true, logWarnings: false});
const file = await readFile(path);
const sizes = {0: 4, 1: 2}; // bytes per element of F32 and F16
const tensors = info.tensorInfo.map((t) => {
	const n = t.dimensions.reduce((a, d) => a * Number(d), 1);
	const start = Number(t.fileOffset);
	return {
		name: t.name, dimensions: t.dimensions.map(Number), type: t.ggmlType, offset: Number(t.offset),
		data: file.subarray(start, start + n * sizes[t.ggmlType]).toString("hex"),
	};
});
const plain = (v) => (typeof v === "bigint" ? Number(v) : Array.isArray(v) ? v.map(plain)
	: v && typeof v === "object" ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)])) : v);
console.log(JSON.stringify({version: info.version, tensorCount: Number(info.tensorCount), metadata: plain(info.metadata), tensors}));
