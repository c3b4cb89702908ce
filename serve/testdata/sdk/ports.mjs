// A port served inside a sandbox, reached through berth serve by the
// official e2b SDK (2.51.0) the way its docs show: sandbox.getHost(port),
// then fetch, then a WebSocket (the ws package: Node 18 has no WebSocket).
// Usage: node ports.mjs, with E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY,
// PORTSERVER (the conformance suite's portserver, static), PORT (where it
// listens inside) and WANT_DOMAIN (the domain berth serve announces, with
// its port) set. Prints "ok <step>" per step and "PASS"; exits 1 on failure.
import assert from 'node:assert/strict'
import { once } from 'node:events'
import dns from 'node:dns'
import { readFile } from 'node:fs/promises'
import { Sandbox } from 'e2b'
import WebSocket from 'ws'

const step = (name) => console.log(`ok ${name}`)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const port = Number(process.env.PORT)

// The wildcard DNS record a deployment of berth serve has (*.domain to
// the server), made here: every name under localhost is 127.0.0.1, which
// getaddrinfo does not do by itself.
const lookup = dns.lookup
dns.lookup = (host, opts, cb) => lookup(host.endsWith('.localhost') ? '127.0.0.1' : host, opts, cb)

async function ports() {
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000, network: { allowPublicTraffic: false } })
  try {
    await sbx.files.write('/tmp/portserver', new Blob([await readFile(process.env.PORTSERVER)]))
    await sbx.commands.run('chmod 755 /tmp/portserver')
    await sbx.commands.run(`/tmp/portserver -http ${port} -tag ${sbx.sandboxId}`, { background: true })

    const host = sbx.getHost(port)
    assert.equal(host, `${port}-${sbx.sandboxId}.${process.env.WANT_DOMAIN}`)
    step('getHost names the port under the domain')

    assert.ok(sbx.trafficAccessToken, 'a sandbox with public traffic off has a traffic token')
    const headers = { 'e2b-traffic-access-token': sbx.trafficAccessToken }
    let res
    for (let i = 0; ; i++) {
      res = await fetch(`http://${host}/`, { headers })
      if (res.status === 200) break
      const early = await res.text() // read once: a body cannot be read twice
      assert.equal(res.status, 502, `while the server starts: ${res.status} ${early}`)
      assert.ok(i < 600, 'the server inside never answered')
      await sleep(100)
    }
    assert.equal(await res.text(), `portserver ${sbx.sandboxId}\n`)
    step('fetch with the traffic token')

    const denied = await fetch(`http://${host}/`)
    assert.equal(denied.status, 403)
    assert.doesNotMatch(await denied.text(), /portserver/)
    step('fetch without the token is refused')

    const ws = new WebSocket(`ws://${host}/ws`, { headers })
    const got = []
    ws.on('message', (m) => got.push(m.toString()))
    await once(ws, 'open')
    const n = 1000
    for (let i = 0; i < n; i++) ws.send(`message ${i}`)
    for (let i = 0; got.length < n; i++) {
      assert.ok(i < 1200, `${got.length} of ${n} echoes`)
      await sleep(50)
    }
    assert.deepEqual(got, Array.from({ length: n }, (_, i) => `message ${i}`))
    ws.close()
    await once(ws, 'close')
    step('WebSocket echoes 1000 messages in order')

    const refused = new WebSocket(`ws://${host}/ws`)
    const [err] = await once(refused, 'error')
    assert.match(`${err}`, /403/)
    step('WebSocket without the token is refused')
  } finally {
    await sbx.kill()
  }
}

try {
  await ports()
  console.log('PASS')
} catch (e) {
  console.error(`FAIL: ${e?.stack || e}`)
  process.exit(1)
}
