// The official Daytona TypeScript SDK against a Daytona API (daytonatest in
// the Go tests, or the real service): the scenario of issue 16. Each step
// prints "ok <step>" when it has checked what it claims; the first failure
// throws and the script exits non-zero. Configuration is the SDK's own:
// DAYTONA_API_URL and DAYTONA_API_KEY. SCENARIO_IMAGE names the image to
// build from (default debian:bookworm-slim). The Go test steers the fake so
// that the first create is throttled and a third sandbox passes the disk
// quota (SCENARIO_FAULTS=1); against a real account those steps are left
// out.
import { createRequire } from 'node:module'

// The SDK finds CommonJS require for its optional modules (form-data,
// busboy) through process.getBuiltinModule, which Node has since 20.16;
// before that it falls back to a global require, given here (Debian 12's
// Node is 18). It must exist before the SDK loads, hence the late import.
globalThis.require ??= createRequire(import.meta.url)
const { Daytona, DaytonaBadRequestError, DaytonaFileNotFoundError, DaytonaNotFoundError, DaytonaRateLimitError } =
  await import('@daytonaio/sdk')

const image = process.env.SCENARIO_IMAGE || 'debian:bookworm-slim'
const faults = process.env.SCENARIO_FAULTS === '1'
const run = Math.random().toString(16).slice(2, 10)
const labels = { 'berth-scenario': run }

function check(cond, what, got) {
  if (!cond) throw new Error(`${what}${got === undefined ? '' : `: got ${JSON.stringify(got)}`}`)
}

function ok(step) {
  console.log(`ok ${step}`)
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

const daytona = new Daytona()
const made = []

async function create(extra) {
  const params = {
    image,
    labels,
    resources: { cpu: 1, memory: 1, disk: 3 },
    autoStopInterval: 30,
    autoDeleteInterval: 60,
    ...extra,
  }
  const sb = await daytona.create(params, { timeout: 120 })
  made.push(sb)
  return sb
}

async function main() {
  // 1. Create from an image with labels, resources and auto-stop. With
  // faults, the first try is throttled: a 429 whose advised wait is in
  // Retry-After-<throttler>, which the SDK raises as its own type.
  let sb
  if (faults) {
    try {
      await create({})
      throw new Error('the throttled create succeeded')
    } catch (err) {
      check(err instanceof DaytonaRateLimitError, 'a 429 is DaytonaRateLimitError', err?.constructor?.name)
      check(err.statusCode === 429, 'its status is 429', err.statusCode)
      const wait = Object.entries(err.headers || {}).find(([k]) => /^retry-after/i.test(k))
      check(wait && Number(wait[1]) > 0, 'it carries Retry-After', err.headers)
      ok(`429 is DaytonaRateLimitError with ${wait[0]}: ${wait[1]}`)
      await sleep(Number(wait[1]) * 1000)
    }
  }
  sb = await create({})
  check(sb.state === 'started', 'the sandbox is started', sb.state)
  check(sb.labels['berth-scenario'] === run, 'labels kept', sb.labels)
  check(sb.cpu === 1 && sb.memory === 1 && sb.disk === 3, 'resources kept', [sb.cpu, sb.memory, sb.disk])
  check(sb.autoStopInterval === 30, 'auto-stop kept', sb.autoStopInterval)
  ok('create from an image with labels, resources and auto-stop')

  // 2. Process exec: exit code and output.
  const ex = await sb.process.executeCommand('echo hello; echo oops >&2; exit 3')
  check(ex.exitCode === 3, 'exit code', ex.exitCode)
  check(ex.result.includes('hello') && ex.result.includes('oops'), 'output', ex.result)
  const cwd = await sb.process.executeCommand('pwd', '/tmp')
  check(cwd.exitCode === 0 && cwd.result.trim() === '/tmp', 'cwd', cwd.result)
  ok('process exec with exit code and output')

  // 3. A session command run async, with its logs: fetched whole, and
  // streamed to callbacks.
  await sb.process.createSession('scenario')
  const cmd = await sb.process.executeSessionCommand('scenario', {
    command: 'echo out1; echo err1 >&2; sleep 0.3; echo out2; exit 5',
    runAsync: true,
  })
  check(typeof cmd.cmdId === 'string' && cmd.cmdId !== '', 'async command id', cmd)
  let streamedOut = ''
  let streamedErr = ''
  await sb.process.getSessionCommandLogs(
    'scenario',
    cmd.cmdId,
    (s) => (streamedOut += s),
    (s) => (streamedErr += s),
  )
  let info
  for (let i = 0; i < 100; i++) {
    info = await sb.process.getSessionCommand('scenario', cmd.cmdId)
    if (info.exitCode !== undefined && info.exitCode !== null) break
    await sleep(100)
  }
  check(info.exitCode === 5, 'async exit code', info)
  const logs = await sb.process.getSessionCommandLogs('scenario', cmd.cmdId)
  check(logs.stdout === 'out1\nout2\n', 'logs stdout', logs)
  check(logs.stderr === 'err1\n', 'logs stderr', logs)
  check(streamedOut === 'out1\nout2\n' && streamedErr === 'err1\n', 'streamed logs', [streamedOut, streamedErr])
  await sb.process.deleteSession('scenario')
  ok('session command run async with its logs')

  // 4. Files: upload, download, list, delete.
  const body = Buffer.from(`scenario ${run}\n`)
  await sb.fs.uploadFile(body, '/tmp/scenario/sub/a.txt')
  const back = await sb.fs.downloadFile('/tmp/scenario/sub/a.txt')
  check(Buffer.compare(back, body) === 0, 'downloaded bytes', back.toString())
  const list = await sb.fs.listFiles('/tmp/scenario/sub')
  check(list.some((f) => f.name === 'a.txt' && f.size === body.length && !f.isDir), 'listed', list)
  const fi = await sb.fs.getFileDetails('/tmp/scenario/sub/a.txt')
  check(fi.size === body.length, 'file details', fi)
  await sb.fs.deleteFile('/tmp/scenario/sub/a.txt')
  try {
    await sb.fs.downloadFile('/tmp/scenario/sub/a.txt')
    throw new Error('downloaded a deleted file')
  } catch (err) {
    check(err instanceof DaytonaNotFoundError, 'a deleted file is DaytonaNotFoundError', err?.constructor?.name)
    check(err instanceof DaytonaFileNotFoundError, 'with the daemon code FILE_NOT_FOUND', err?.code)
  }
  ok('file upload, download, list and delete')

  // 5. A preview link for a port: an HTTP server in the sandbox, reached
  // through the preview URL with its token, and through a signed URL
  // until it is expired.
  const port = 20000 + Math.floor(Math.random() * 20000)
  await sb.fs.uploadFile(Buffer.from(`preview ${run}\n`), '/tmp/www/index.html')
  await sb.process.createSession('web')
  await sb.process.executeSessionCommand('web', {
    command: `exec busybox httpd -f -p 127.0.0.1:${port} -h /tmp/www`,
    runAsync: true,
  })
  const link = await sb.getPreviewLink(port)
  check(link.url && link.token, 'a preview link has a url and a token', link)
  let page
  for (let i = 0; i < 50; i++) {
    const res = await fetch(link.url, { headers: { 'x-daytona-preview-token': link.token } })
    if (res.status === 200) {
      page = await res.text()
      break
    }
    await sleep(100)
  }
  check(page === `preview ${run}\n`, 'the page through the preview link', page)
  const anon = await fetch(link.url)
  check(anon.status === 401 || anon.status === 403, 'the preview link without its token is refused', anon.status)
  const signed = await sb.getSignedPreviewUrl(port, 60)
  check(signed.port === port && signed.url && signed.token, 'a signed preview url', signed)
  const viaSigned = await fetch(signed.url)
  check(viaSigned.status === 200 && (await viaSigned.text()) === page, 'the page through the signed url')
  await sb.expireSignedPreviewUrl(port, signed.token)
  const expired = await fetch(signed.url)
  check(expired.status >= 400, 'an expired signed url is refused', expired.status)
  await sb.process.deleteSession('web')
  ok('preview link for a port')

  // 6. Stop, start, list by labels, delete.
  await sb.stop()
  check(sb.state === 'stopped', 'stopped', sb.state)
  await sb.start()
  check(sb.state === 'started', 'started again', sb.state)
  const other = await create({ labels: { 'berth-scenario': `${run}-other` } })
  const found = []
  for await (const s of daytona.list({ labels })) found.push(s.id)
  check(found.includes(sb.id) && !found.includes(other.id), 'list by labels', found)
  await sb.delete()
  const after = []
  for await (const s of daytona.list({ labels })) if (s.state !== 'destroyed' && s.state !== 'destroying') after.push(s.id)
  check(!after.includes(sb.id), 'gone from the list after delete', after)
  try {
    await daytona.get(sb.id).then((s) => {
      if (s.state !== 'destroyed' && s.state !== 'destroying') throw new Error(`still ${s.state}`)
      throw new DaytonaNotFoundError('destroyed')
    })
  } catch (err) {
    check(err instanceof DaytonaNotFoundError, 'a deleted sandbox is not found', err?.message)
  }
  ok('stop, start, delete and list by labels')

  // 7. The quota error, as the SDK's own type: the fake's disk quota has
  // room for two sandboxes of 3 GB.
  if (faults) {
    try {
      await create({ labels: { 'berth-scenario': `${run}-quota` }, resources: { cpu: 1, memory: 1, disk: 6 } })
      throw new Error('a create past the disk quota succeeded')
    } catch (err) {
      check(err instanceof DaytonaBadRequestError, 'a quota refusal is DaytonaBadRequestError', err?.constructor?.name)
      check(/Total disk limit exceeded/.test(err.message), 'with the quota text', err.message)
      ok('quota error is DaytonaBadRequestError')
    }
  }
}

try {
  await main()
  console.log('PASS')
} finally {
  for (const sb of made) {
    try {
      await sb.delete()
    } catch (err) {
      if (!(err instanceof DaytonaNotFoundError)) console.error(`cleanup ${sb.id}: ${err.message}`)
    }
  }
  await daytona[Symbol.asyncDispose]?.()
}
