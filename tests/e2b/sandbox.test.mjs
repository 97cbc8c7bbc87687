// Control plane through the SDK: create with options, getInfo, list with
// metadata filters and pages, setTimeout and expiry, connect, kill, metrics.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, SandboxNotFoundError, NotFoundError, AuthenticationError, TimeoutError } from 'e2b'
import { tracker, until, KEY, raw } from './lib.mjs'

const t = tracker(Sandbox)
after(() => t.cleanup())

test('create with metadata, envVars and timeout; getInfo reports them', async () => {
  const sbx = await t.create('base', {
    metadata: { purpose: 'sdk-test', run: 'one' },
    envs: { GREETING: 'hello from envVars' },
    timeoutMs: 120_000,
  })
  assert.match(sbx.sandboxId, /^[a-z0-9]{20}$/)
  const info = await sbx.getInfo()
  assert.equal(info.sandboxId, sbx.sandboxId)
  assert.equal(info.templateId, 'base')
  assert.equal(info.state, 'running')
  assert.deepEqual(info.metadata, { purpose: 'sdk-test', run: 'one' })
  const life = info.endAt.getTime() - info.startedAt.getTime()
  assert.ok(life >= 118_000 && life <= 122_000, `lifetime ${life}`)
  const r = await sbx.commands.run('echo $GREETING')
  assert.equal(r.stdout, 'hello from envVars\n')
  assert.equal(await sbx.isRunning(), true)
})

test('the code interpreter template name is accepted', async () => {
  const sbx = await t.create('code-interpreter-v1')
  assert.equal((await sbx.getInfo()).templateId, 'code-interpreter-v1')
  assert.equal((await sbx.commands.run('echo ok')).stdout, 'ok\n')
})

test('an unknown template is an error, not a sandbox', async () => {
  await assert.rejects(Sandbox.create('no-such-template'), (e) => /not found/.test(e.message))
})

test('list filters by metadata and pages with nextToken', async () => {
  const tag = `list-${Date.now()}`
  const made = []
  for (let i = 0; i < 3; i++) made.push(await t.create({ metadata: { tag, i: String(i) } }))
  await t.create({ metadata: { tag: 'someone-else' } })

  // newest first, as E2B lists; made in one second, ordered by the ms
  const ids = made.map((s) => s.sandboxId)
  const all = await Sandbox.list({ query: { metadata: { tag } } }).nextItems()
  assert.deepEqual(all.map((s) => s.sandboxId), [...ids].reverse())
  const asc = await Sandbox.list({ query: { metadata: { tag } }, order: 'asc' }).nextItems()
  assert.deepEqual(asc.map((s) => s.sandboxId), ids)
  // startedAfter: from that time on (inclusive)
  const second = await made[1].getInfo()
  const after = await Sandbox.list({ query: { metadata: { tag }, startedAfter: second.startedAt },
    order: 'asc' }).nextItems()
  assert.deepEqual(after.map((s) => s.sandboxId), ids.slice(1))
  const later = new Date(Math.max(...all.map((s) => s.startedAt.getTime())) + 1)
  assert.deepEqual(await Sandbox.list({ query: { metadata: { tag }, startedAfter: later } })
    .nextItems(), [])
  const one = await Sandbox.list({ query: { metadata: { tag, i: '1' } } }).nextItems()
  assert.deepEqual(one.map((s) => s.sandboxId), [made[1].sandboxId])

  for (const order of ['asc', 'desc']) {
    const pager = Sandbox.list({ query: { metadata: { tag } }, limit: 2, order })
    const seen = []
    while (pager.hasNext) seen.push(...(await pager.nextItems()))
    assert.deepEqual(seen.map((s) => s.sandboxId), order === 'asc' ? ids : [...ids].reverse())
  }

  const paused = await Sandbox.list({ query: { metadata: { tag }, state: ['paused'] } }).nextItems()
  assert.deepEqual(paused, [])
})

test('setTimeout shortens the lifetime and the sandbox expires', async () => {
  const sbx = await t.create({ timeoutMs: 300_000 })
  await sbx.setTimeout(2_000)
  const info = await sbx.getInfo()
  assert.ok(info.endAt.getTime() - Date.now() <= 2_500)
  await until(async () => !(await sbx.isRunning()), 'expiry', 30_000)
  // The SDK's own words for a sandbox that timed out.
  await assert.rejects(sbx.files.read('/etc/hostname'), TimeoutError)
  await assert.rejects(sbx.commands.run('true'), SandboxNotFoundError)
  await assert.rejects(Sandbox.connect(sbx.sandboxId), SandboxNotFoundError)
})

test('connect extends, never shortens, and sees the same sandbox', async () => {
  const sbx = await t.create({ timeoutMs: 60_000 })
  await sbx.files.write('/tmp/marker', 'm')
  const again = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 600_000 })
  assert.equal(again.sandboxId, sbx.sandboxId)
  assert.equal(await again.files.read('/tmp/marker'), 'm')
  const longer = (await again.getInfo()).endAt.getTime() - Date.now()
  assert.ok(longer > 590_000, `extended to ${longer}`)
  await Sandbox.connect(sbx.sandboxId, { timeoutMs: 10_000 })
  const still = (await again.getInfo()).endAt.getTime() - Date.now()
  assert.ok(still > 580_000, `connect shortened it to ${still}`)
})

test('kill ends the sandbox; a second kill and getInfo say it is gone', async () => {
  const sbx = await t.create()
  assert.equal(await sbx.kill(), true)
  assert.equal(await sbx.isRunning(), false)
  assert.equal(await Sandbox.kill(sbx.sandboxId), false)
  await assert.rejects(Sandbox.getInfo(sbx.sandboxId), NotFoundError)
})

test('metrics come back with the documented fields', async () => {
  const sbx = await t.create()
  await sbx.commands.run('head -c 5000000 /dev/zero > /tmp/blob')
  const m = await sbx.getMetrics()
  assert.ok(m.length >= 1)
  const last = m[m.length - 1]
  for (const k of ['cpuCount', 'cpuUsedPct', 'memUsed', 'memTotal', 'diskUsed', 'diskTotal'])
    assert.equal(typeof last[k], 'number', k)
  assert.ok(last.diskUsed >= 5_000_000, `diskUsed ${last.diskUsed}`)
  // a range: the current sample when it covers now, nothing before the
  // sandbox existed (no history is kept yet)
  const now = Date.now()
  const inRange = await sbx.getMetrics({ start: new Date(now - 60_000), end: new Date(now + 1000) })
  assert.equal(inRange.length, 1)
  const before = await sbx.getMetrics({ start: new Date(now - 3_600_000), end: new Date(now - 1_800_000) })
  assert.deepEqual(before, [])
  const r = await raw(`/sandboxes/${sbx.sandboxId}/metrics?start=10&end=5`, { headers: { 'X-API-Key': KEY } })
  assert.equal(r.status, 400)
})

test('a wrong API key is an AuthenticationError; another tenant sees nothing', async () => {
  await assert.rejects(
    Sandbox.create({ apiKey: 'e2b_' + '0'.repeat(40) }),
    AuthenticationError,
  )
  const sbx = await t.create()
  const otherKey = process.env.SBX_E2B_OTHER_KEY
  assert.notEqual(otherKey, KEY)
  await assert.rejects(Sandbox.getInfo(sbx.sandboxId, { apiKey: otherKey }), NotFoundError)
  assert.equal(await Sandbox.kill(sbx.sandboxId, { apiKey: otherKey }), false)
  const theirs = await Sandbox.list({ apiKey: otherKey }).nextItems()
  assert.ok(!theirs.some((s) => s.sandboxId === sbx.sandboxId))
  assert.equal(await sbx.isRunning(), true)
})

test('@e2b/code-interpreter: its sandbox starts, runs commands and code (more in code.test.mjs)', async () => {
  const { Sandbox: CodeSandbox } = await import('@e2b/code-interpreter')
  const sbx = await CodeSandbox.create()
  try {
    assert.equal((await sbx.getInfo()).templateId, 'code-interpreter-v1')
    assert.equal((await sbx.commands.run('echo ci')).stdout, 'ci\n')
    assert.equal((await sbx.runCode('1+1')).text, '2')
  } finally {
    await sbx.kill()
  }
})
