// Replays frames against an OpenEnv server's /ws with the ws package (a
// WebSocket client that is not berth's) and prints what came back.
// stdin: {"url": "ws://host:port/ws", "frames": ["...", ...]}
// stdout: a JSON array, per frame {"reply": text or null, "close": code or null}
import { WebSocket } from "ws";

const input = JSON.parse(await new Promise((resolve) => {
  let s = "";
  process.stdin.on("data", (d) => (s += d));
  process.stdin.on("end", () => resolve(s));
}));

const ws = new WebSocket(input.url);
const events = []; // messages and the close, in order
let wake = null;
const push = (e) => {
  events.push(e);
  if (wake) { const w = wake; wake = null; w(); }
};
ws.on("message", (data, isBinary) => push({ reply: isBinary ? null : data.toString("utf8") }));
ws.on("close", (code) => push({ close: code }));
ws.on("error", (err) => push({ error: String(err) }));
await new Promise((resolve, reject) => { ws.once("open", resolve); ws.once("error", reject); });

const next = async () => {
  if (events.length === 0) {
    let timer;
    await Promise.race([
      new Promise((r) => (wake = r)),
      new Promise((r) => (timer = setTimeout(r, 60000))),
    ]);
    clearTimeout(timer); // a pending timer would keep node alive
  }
  return events.shift() ?? { error: "no answer within 60s" };
};

const out = [];
for (const frame of input.frames) {
  ws.send(frame); // a text frame, as the Python client sends
  const e = await next();
  out.push({ reply: e.reply ?? null, close: e.close ?? null, error: e.error ?? null });
  if (e.close !== undefined) break;
}
ws.terminate();
process.stdout.write(JSON.stringify(out) + "\n");
