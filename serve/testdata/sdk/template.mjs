// E2B template builds against berth serve, run by the official e2b SDK
// (2.51.0): Template.build, the alias check, a sandbox from the alias.
// Usage: node template.mjs build|fail|other|recipe with E2B_API_URL,
// E2B_SANDBOX_URL, E2B_DOMAIN, E2B_API_KEY, ALIAS (the template's name)
// and BASE_IMAGE (an image the server's provider has) set; recipe also
// reads PAYLOAD (a file holding a tar.gz in base64) and PAYLOAD_SHA256
// (the sha256 of the file blob.bin in it).
// Prints "ok <step>" per step and "PASS" at the end; exits 1 on failure.
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const sdkName = process.env.SDK || 'e2b'
const { Template, Sandbox, BuildError } = await import(sdkName)
const mode = process.argv[2] || 'build'
const alias = process.env.ALIAS
const base = process.env.BASE_IMAGE
const step = (name) => console.log(`ok ${name}`)

// The template of the Must-show: an image, an env, a copy of a small file
// from the client, a run command that uses it, a working directory.
function template(dir) {
  return Template({ fileContextPath: dir })
    .fromImage(base)
    .setEnvs({ GREETING: 'hello from the template' })
    .copy('hello.txt', '/opt/app/hello.txt')
    .runCmd('echo "built by runCmd" > /opt/app/run.txt && cat /opt/app/hello.txt >> /opt/app/run.txt')
    .setWorkdir('/opt/app')
}

async function build() {
  const dir = mkdtempSync(join(tmpdir(), 'berth-template-'))
  try {
    writeFileSync(join(dir, 'hello.txt'), 'copied from the client\n')
    const logs = []
    const info = await Template.build(template(dir), alias, { onBuildLogs: (e) => logs.push(e) })
    assert.equal(info.name, alias)
    assert.ok(info.templateId && info.buildId, JSON.stringify(info))
    const text = logs.map((e) => e.message).join('\n')
    assert.match(text, /\[step 3\] RUN echo "built by runCmd"/)
    assert.match(text, /template .* is ready/)
    step('Template.build from an image with a copy and a run command')

    assert.equal(await Template.exists(alias), true)
    assert.equal(await Template.aliasExists(alias), true)
    assert.equal(await Template.exists(`missing-${alias}`), false)
    step('alias check: exists, and a missing alias does not')

    const sbx = await Sandbox.create(alias, { timeoutMs: 120_000 })
    const r = await sbx.commands.run('pwd; cat run.txt; echo "$GREETING"')
    assert.equal(r.stdout, '/opt/app\nbuilt by runCmd\ncopied from the client\nhello from the template\n')
    await sbx.kill()
    step('a sandbox from the alias runs a command that sees the build')

    const again = []
    const info2 = await Template.build(template(dir), alias, { onBuildLogs: (e) => again.push(e) })
    assert.equal(info2.templateId, info.templateId)
    assert.notEqual(info2.buildId, info.buildId)
    const text2 = again.map((e) => e.message).join('\n')
    assert.match(text2, /cache hit/)
    assert.match(text2, /Skipping upload of 'hello.txt', already cached/)
    step('the same template again is a cache hit, its file already uploaded')
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

async function fail() {
  const logs = []
  const tpl = Template().fromImage(base).runCmd('echo about to fail; exit 7')
  await assert.rejects(Template.build(tpl, alias, { onBuildLogs: (e) => logs.push(e) }), (e) => {
    assert.ok(e instanceof BuildError, `${e}`)
    assert.match(e.message, /step 1/)
    assert.match(e.message, /exit status 7/)
    return true
  })
  assert.ok(logs.some((e) => e.message === 'about to fail'), logs.map((e) => e.message).join('\n'))
  step('a failing run command fails the build with its output')
}

// other runs with another API key than the one that built ALIAS.
async function other() {
  // 403 on the alias route: the SDK reads it as "the name is taken".
  assert.equal(await Template.exists(alias), true)
  await assert.rejects(Sandbox.create(alias, { timeoutMs: 60_000 }), (e) => {
    assert.match(`${e.message}`, /another API key/)
    return true
  })
  await assert.rejects(Template.build(Template().fromImage(base).runCmd('true'), alias), (e) => {
    assert.ok(e instanceof BuildError, `${e}`)
    assert.match(e.message, /belongs to another API key/)
    return true
  })
  step("another key's template: taken, not usable, not rebuildable")
}

// recipe takes the path of the OpenEnv recipe's E2B materialization
// (Miles' tb2_sandbox_e2b: ensure_task_template, then create_task_sandbox):
// the alias is checked first and built only when missing, as root, with
// the template's cpu and memory, from run commands one of which carries an
// archive in base64 (the env server's source, about 60 KB of command);
// then a sandbox of the alias with metadata, the server started in the
// background as root, the TTL re-armed; a forced rebuild (skipCache, the
// recipe's --force) builds again instead of answering from the cache.
async function recipe() {
  const payload = readFileSync(process.env.PAYLOAD, 'utf8').trim()
  assert.ok(payload.length > 50_000, `payload of ${payload.length} bytes`)
  const tpl = () =>
    Template()
      .fromImage(base)
      .setUser('root')
      .runCmd('mkdir -p /opt/src && id -u > /opt/src/build-uid')
      .runCmd(`echo ${payload} | base64 -d | tar xz -C /opt/src`)
  const opts = (extra) => ({ cpuCount: 2, memoryMB: 2048, ...extra })

  assert.equal(await Template.aliasExists(alias), false)
  const first = []
  await Template.build(tpl(), alias, opts({ onBuildLogs: (e) => first.push(e) }))
  assert.ok(!first.some((e) => /cache hit/.test(e.message)), first.map((e) => e.message).join('\n'))
  assert.equal(await Template.aliasExists(alias), true)
  step('the recipe template: alias missing, built as root with an embedded archive')

  const sbx = await Sandbox.create(alias, { timeoutMs: 300_000, metadata: { 'openenv-tbench2-task': 'demo', 'openenv-launcher': 'ci' } })
  try {
    const info = await sbx.getInfo()
    assert.equal(info.metadata['openenv-tbench2-task'], 'demo')
    await sbx.commands.run("bash -c 'echo serving > /tmp/openenv-server.log; exec sleep 600' > /dev/null 2>&1", { background: true, user: 'root' })
    const r = await sbx.commands.run(
      'for i in $(seq 50); do [ -s /tmp/openenv-server.log ] && break; sleep 0.1; done; cat /tmp/openenv-server.log /opt/src/build-uid; sha256sum /opt/src/env_src/blob.bin',
      { user: 'root' },
    )
    assert.equal(r.stdout, `serving\n0\n${process.env.PAYLOAD_SHA256}  /opt/src/env_src/blob.bin\n`)
    await sbx.setTimeout(120_000)
  } finally {
    await sbx.kill()
  }
  step('a sandbox of the alias with metadata, its server started in the background as root')

  const forced = []
  await Template.build(tpl(), alias, opts({ skipCache: true, onBuildLogs: (e) => forced.push(e) }))
  const text = forced.map((e) => e.message).join('\n')
  assert.doesNotMatch(text, /cache hit/)
  assert.match(text, /\[step 3\] RUN echo H4sI/)
  step('skipCache builds the template again')
}

try {
  if (mode === 'fail') await fail()
  else if (mode === 'recipe') await recipe()
  else if (mode === 'other') await other()
  else await build()
  console.log('PASS')
} catch (e) {
  console.error(`FAIL (${sdkName} ${mode}): ${e?.stack || e}`)
  process.exit(1)
}
