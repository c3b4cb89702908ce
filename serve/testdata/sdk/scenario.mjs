// The Must-show scenario of berth serve, run by the official e2b SDK.
// Usage: SDK=e2b|e2b-old node scenario.mjs [scenario|bench|bench-first]
// with E2B_API_URL, E2B_SANDBOX_URL, E2B_DOMAIN and E2B_API_KEY set.
// Prints "ok <step>" per step and "PASS" at the end; exits 1 on failure.
// In bench mode it prints one JSON line of timings instead.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'

const sdkName = process.env.SDK || 'e2b'
const mode = process.argv[2] || 'scenario'
const { Sandbox, CommandExitError } = await import(sdkName)
const run = randomBytes(6).toString('hex')
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const step = (name) => console.log(`ok ${name}`)

async function listIds(query) {
  const paginator = Sandbox.list({ query, limit: 100 })
  const ids = []
  while (paginator.hasNext) {
    for (const s of await paginator.nextItems()) ids.push(s.sandboxId)
  }
  return ids
}

// halfway is where a test kills one of two server replicas
// (providers/k8s TestServeReplicas): with HALFWAY_FILE set it prints
// "halfway" and waits for that file to exist.
async function halfway() {
  const file = process.env.HALFWAY_FILE
  if (!file) return
  console.log('halfway')
  while (!existsSync(file)) await sleep(50)
}

async function scenario() {
  const sbx = await Sandbox.create('base', {
    metadata: { suite: run, role: 'a' },
    envs: { FROM_CREATE: 'yes' },
    timeoutMs: 120_000,
  })
  assert.match(sbx.sandboxId, /^[a-z0-9]+$/)
  step('create with metadata and envs')

  const out = []
  const errs = []
  const res = await sbx.commands.run('echo out; echo err >&2', {
    onStdout: (d) => out.push(d),
    onStderr: (d) => errs.push(d),
  })
  assert.equal(res.exitCode, 0)
  assert.equal(out.join(''), 'out\n')
  assert.equal(errs.join(''), 'err\n')
  assert.equal(res.stdout, 'out\n')
  assert.equal(res.stderr, 'err\n')
  step('commands.run streams stdout and stderr to callbacks')

  await assert.rejects(sbx.commands.run('echo failing >&2; exit 3'), (e) => {
    assert.ok(e instanceof CommandExitError, `${e}`)
    assert.equal(e.exitCode, 3)
    assert.equal(e.stderr, 'failing\n')
    return true
  })
  step('non-zero exit is CommandExitError')

  const env = await sbx.commands.run('pwd; echo $FROM_CREATE $FROM_CALL', { cwd: '/tmp', envs: { FROM_CALL: 'too' } })
  assert.equal(env.stdout, '/tmp\nyes too\n')
  step('cwd and env')

  const bg = await sbx.commands.run('echo started; sleep 60', { background: true })
  const procs = await sbx.commands.list()
  assert.ok(procs.some((p) => p.pid === bg.pid), `pid ${bg.pid} not in ${JSON.stringify(procs)}`)
  assert.equal(await sbx.commands.kill(bg.pid), true)
  await assert.rejects(bg.wait(), (e) => e instanceof CommandExitError && e.exitCode !== 0)
  assert.equal(await sbx.commands.kill(bg.pid), false)
  step('background command killed by pid')

  await sbx.files.write('/tmp/dir/a.txt', 'hello files')
  assert.equal(await sbx.files.read('/tmp/dir/a.txt'), 'hello files')
  const entries = await sbx.files.list('/tmp/dir')
  assert.deepEqual(entries.map((e) => e.name), ['a.txt'])
  assert.equal(entries[0].type, 'file')
  assert.equal(await sbx.files.exists('/tmp/dir/a.txt'), true)
  assert.equal(await sbx.files.makeDir('/tmp/made/deep'), true)
  assert.equal(await sbx.files.makeDir('/tmp/made/deep'), false)
  await sbx.files.remove('/tmp/dir/a.txt')
  assert.equal(await sbx.files.exists('/tmp/dir/a.txt'), false)
  step('files write, read, list, exists, makeDir, remove')
  await halfway()

  const big = randomBytes(5 << 20)
  await sbx.files.write('/tmp/big.bin', new Blob([big]))
  const back = await sbx.files.read('/tmp/big.bin', { format: 'bytes' })
  assert.equal(back.length, big.length)
  assert.ok(Buffer.from(back).equals(big), '5 MB file changed on the way')
  step('5 MB round trip')

  const other = await Sandbox.create('base', { metadata: { suite: run, role: 'b' }, timeoutMs: 120_000 })
  const both = await listIds({ metadata: { suite: run } })
  assert.deepEqual(both.sort(), [sbx.sandboxId, other.sandboxId].sort())
  assert.deepEqual(await listIds({ metadata: { suite: run, role: 'b' } }), [other.sandboxId])
  step('list filtered by metadata')

  await other.setTimeout(1_000)
  await sleep(2_500)
  assert.equal(await other.isRunning(), false)
  assert.ok(!(await listIds({ metadata: { suite: run } })).includes(other.sandboxId))
  assert.equal(await Sandbox.kill(other.sandboxId), false)
  step('setTimeout shortens life; gone after')

  const again = await Sandbox.connect(sbx.sandboxId)
  const r2 = await again.commands.run('cat /tmp/big.bin | wc -c')
  assert.equal(r2.stdout.trim(), String(5 << 20))
  assert.equal(await again.isRunning(), true)
  step('connect from a second client')

  await sbx.kill()
  assert.equal(await sbx.isRunning(), false)
  assert.equal(await Sandbox.kill(sbx.sandboxId), false)
  assert.equal(await Sandbox.kill('nosuchsandbox00000000'), false)
  step('kill; kill of an unknown id is false')
}

// pct returns the q-quantile of xs (nearest rank).
function pct(xs, q) {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.max(0, Math.ceil(q * s.length) - 1)]
}

// timeRuns times runs commands.run('true') on one new sandbox.
async function timeRuns(runs) {
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000 })
  await sbx.commands.run('true')
  const execs = []
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now()
    await sbx.commands.run('true')
    execs.push(performance.now() - t0)
  }
  await sbx.kill()
  return execs
}

async function bench() {
  const creates = []
  const n = Number(process.env.BENCH_CREATES) || 20
  const runs = Number(process.env.BENCH_RUNS) || 200
  // One warm-up of each, so connection set-up is not counted.
  await (await Sandbox.create('base', { timeoutMs: 60_000 })).kill()
  for (let i = 0; i < n; i++) {
    const t0 = performance.now()
    const s = await Sandbox.create('base', { timeoutMs: 60_000 })
    creates.push(performance.now() - t0)
    await s.kill()
  }
  // The same without internet (allowInternetAccess defaults to true; a
  // provider may need more to give a sandbox a network).
  const offline = []
  for (let i = 0; i < n; i++) {
    const t0 = performance.now()
    const s = await Sandbox.create('base', { timeoutMs: 60_000, allowInternetAccess: false })
    offline.push(performance.now() - t0)
    await s.kill()
  }
  const execs = await timeRuns(runs)
  const round = (x) => Math.round(x * 100) / 100
  console.log(JSON.stringify({
    sdk: sdkName, creates: n, runs,
    create_p50_ms: round(pct(creates, 0.5)), create_p95_ms: round(pct(creates, 0.95)),
    create_offline_p50_ms: round(pct(offline, 0.5)), create_offline_p95_ms: round(pct(offline, 0.95)),
    run_true_p50_ms: round(pct(execs, 0.5)), run_true_p95_ms: round(pct(execs, 0.95)),
  }))
}

// benchFirst times what serve/osb_sdk_test.go's BenchmarkOpenSandboxSDK
// sets beside the OpenSandbox SDK: create-to-first-command (Sandbox.create,
// then commands.run('true')) and the round trip of commands.run('true').
async function benchFirst() {
  const n = Number(process.env.BENCH_CREATES) || 20
  const runs = Number(process.env.BENCH_RUNS) || 200
  const warm = await Sandbox.create('base', { timeoutMs: 120_000 })
  await warm.commands.run('true')
  await warm.kill()
  const firsts = []
  for (let i = 0; i < n; i++) {
    const t0 = performance.now()
    const s = await Sandbox.create('base', { timeoutMs: 120_000 })
    await s.commands.run('true')
    firsts.push(performance.now() - t0)
    await s.kill()
  }
  const execs = await timeRuns(runs)
  const round = (x) => Math.round(x * 100) / 100
  console.log(JSON.stringify({
    sdk: sdkName, creates: n, runs,
    first_command_p50_ms: round(pct(firsts, 0.5)), first_command_p95_ms: round(pct(firsts, 0.95)),
    run_true_p50_ms: round(pct(execs, 0.5)), run_true_p95_ms: round(pct(execs, 0.95)),
  }))
}

try {
  if (mode === 'bench') await bench()
  else if (mode === 'bench-first') await benchFirst()
  else await scenario()
  console.log('PASS')
} catch (e) {
  console.error(`FAIL (${sdkName}): ${e?.stack || e}`)
  process.exit(1)
}
