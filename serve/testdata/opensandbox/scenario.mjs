// The OpenSandbox Must-show scenario of berth serve, run by the official
// OpenSandbox JS SDK (@alibaba-group/opensandbox).
// Usage: node scenario.mjs [scenario|bench]
// with OSB_DOMAIN (host:port of berth serve), OSB_API_KEY and OSB_IMAGE set.
// Prints "ok <step>" per step and "PASS" at the end; exits 1 on failure.
// In bench mode it prints one JSON line of timings instead.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import {
  ConnectionConfig,
  DEFAULT_EGRESS_PORT,
  DEFAULT_EXECD_PORT,
  Sandbox,
  SandboxApiException,
  SandboxManager,
} from '@alibaba-group/opensandbox'

const mode = process.argv[2] || 'scenario'
const image = process.env.OSB_IMAGE
const run = randomBytes(6).toString('hex')
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const step = (name) => console.log(`ok ${name}`)
const connectionConfig = new ConnectionConfig({
  domain: process.env.OSB_DOMAIN,
  apiKey: process.env.OSB_API_KEY,
  useServerProxy: true,
  requestTimeoutSeconds: 120,
})
const text = (msgs) => msgs.map((m) => m.text).join('\n')

async function scenario() {
  const sbx = await Sandbox.create({
    connectionConfig,
    image,
    resource: { cpu: '1', memory: '512Mi' },
    metadata: { suite: run, role: 'a' },
    env: { FROM_CREATE: 'yes' },
    timeoutSeconds: 120,
    readyTimeoutSeconds: 120,
  })
  assert.match(sbx.id, /^[a-z0-9]+$/)
  const ep = await sbx.getEndpoint(DEFAULT_EXECD_PORT)
  assert.ok(ep.endpoint.endsWith(`/sandboxes/${sbx.id}/proxy/${DEFAULT_EXECD_PORT}`), ep.endpoint)
  assert.ok(ep.headers && ep.headers['X-EXECD-ACCESS-TOKEN'], 'the execd endpoint carries the access token')
  const egress = await sbx.getEndpoint(DEFAULT_EGRESS_PORT)
  assert.ok(egress.endpoint.endsWith(`/proxy/${DEFAULT_EGRESS_PORT}`), egress.endpoint)
  assert.ok(['allow', 'deny'].includes((await sbx.getEgressPolicy()).defaultAction))
  const info = await sbx.getInfo()
  assert.equal(info.status.state, 'Running')
  assert.deepEqual(info.metadata, { suite: run, role: 'a' })
  assert.equal(info.image.uri, image)
  assert.ok(info.expiresAt - info.createdAt >= 119_000 && info.expiresAt - info.createdAt <= 121_000, `life ${info.expiresAt - info.createdAt} ms`)
  step('create with resource limits and metadata, then the endpoint lookup')

  const ok = await sbx.commands.run('echo out; echo err >&2; pwd; echo $FROM_CREATE $FROM_CALL', {
    workingDirectory: '/tmp',
    envs: { FROM_CALL: 'too' },
  })
  assert.equal(ok.exitCode, 0)
  assert.equal(text(ok.logs.stdout), 'out\n/tmp\nyes too')
  assert.equal(text(ok.logs.stderr), 'err')
  assert.ok(ok.id, 'the init event names the execution')
  const failed = await sbx.commands.run('echo failing >&2; exit 3')
  assert.equal(failed.exitCode, 3)
  assert.equal(text(failed.logs.stderr), 'failing')
  assert.equal(failed.error.name, 'CommandExecError')
  const after = await sbx.commands.getCommandStatus(failed.id)
  assert.equal(after.running, false)
  assert.equal(after.exitCode, 3)
  step('a foreground command with output and a non-zero exit code')

  const bg = await sbx.commands.run('echo started; sleep 1; echo done >&2; exit 5', { background: true })
  assert.ok(bg.id)
  const first = await sbx.commands.getCommandStatus(bg.id)
  assert.equal(first.running, true)
  let st = first
  for (let i = 0; st.running && i < 300; i++) {
    await sleep(100)
    st = await sbx.commands.getCommandStatus(bg.id)
  }
  assert.equal(st.running, false)
  assert.equal(st.exitCode, 5)
  assert.ok(st.finishedAt instanceof Date && st.finishedAt >= st.startedAt)
  const logs = await sbx.commands.getBackgroundCommandLogs(bg.id)
  assert.equal(logs.content, 'started\ndone\n')
  assert.equal(logs.cursor, 'started\ndone\n'.length)
  const tail = await sbx.commands.getBackgroundCommandLogs(bg.id, 'started\n'.length)
  assert.equal(tail.content, 'done\n')
  step('a background command with status and logs')

  const big = randomBytes(5 << 20)
  await sbx.files.writeFiles([{ path: '/tmp/up/big.bin', data: big, mode: 600 }])
  const back = await sbx.files.readBytes('/tmp/up/big.bin')
  assert.equal(back.length, big.length)
  assert.ok(Buffer.from(back).equals(big), '5 MB file changed on the way')
  const wc = await sbx.commands.run('wc -c < /tmp/up/big.bin')
  assert.equal(text(wc.logs.stdout).trim(), String(5 << 20))
  step('upload and download of a 5 MB file')

  const again = await Sandbox.connect({ sandboxId: sbx.id, connectionConfig })
  assert.equal((await again.getInfo()).id, sbx.id)
  const manager = SandboxManager.create({ connectionConfig })
  const listed = await manager.listSandboxInfos({ metadata: { suite: run } })
  assert.deepEqual(listed.items.map((s) => s.id), [sbx.id])
  await sbx.kill()
  await assert.rejects(sbx.getInfo(), (e) => e instanceof SandboxApiException && e.statusCode === 404)
  assert.equal((await manager.listSandboxInfos({ metadata: { suite: run } })).items.length, 0)
  await manager.close()
  await again.close()
  await sbx.close()
  step('get, then delete')
}

// pct returns the q-quantile of xs (nearest rank).
function pct(xs, q) {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.max(0, Math.ceil(q * s.length) - 1)]
}

// bench times create-to-first-command (Sandbox.create, which waits for the
// execd ping, then commands.run('true')) and the round trip of
// commands.run('true') on one sandbox.
async function bench() {
  const n = Number(process.env.BENCH_CREATES) || 20
  const runs = Number(process.env.BENCH_RUNS) || 200
  const opts = { connectionConfig, image, timeoutSeconds: 120 }
  const warm = await Sandbox.create(opts)
  await warm.commands.run('true')
  await warm.kill()
  const firsts = []
  for (let i = 0; i < n; i++) {
    const t0 = performance.now()
    const s = await Sandbox.create(opts)
    await s.commands.run('true')
    firsts.push(performance.now() - t0)
    await s.kill()
  }
  const sbx = await Sandbox.create(opts)
  await sbx.commands.run('true')
  const execs = []
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now()
    const r = await sbx.commands.run('true')
    execs.push(performance.now() - t0)
    assert.equal(r.exitCode, 0)
  }
  await sbx.kill()
  await sbx.close()
  const round = (x) => Math.round(x * 100) / 100
  console.log(JSON.stringify({
    sdk: 'opensandbox', creates: n, runs,
    first_command_p50_ms: round(pct(firsts, 0.5)), first_command_p95_ms: round(pct(firsts, 0.95)),
    run_true_p50_ms: round(pct(execs, 0.5)), run_true_p95_ms: round(pct(execs, 0.95)),
  }))
}

try {
  if (mode === 'bench') await bench()
  else await scenario()
  console.log('PASS')
} catch (e) {
  console.error(`FAIL (opensandbox): ${e?.stack || e}`)
  process.exit(1)
}
