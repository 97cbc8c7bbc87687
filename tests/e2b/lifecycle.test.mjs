// Pause, resume (connect), lifecycle on create, fork and snapshots through
// the SDK (docs/e2b.md).
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, SandboxNotFoundError, Template } from 'e2b'
import { KEY, raw, tracker, until } from './lib.mjs'

const t = tracker(Sandbox)
after(() => t.cleanup())

test('pause freezes, connect resumes, a second pause of a paused sandbox is false', async () => {
  const sbx = await t.create({ timeoutMs: 120_000 })
  await sbx.commands.run('i=0; while :; do i=$((i+1)); echo $i >> /home/user/n; sleep 0.02; done',
    { background: true })
  await until(async () => (await sbx.files.read('/home/user/n')).split('\n').length > 5, 'counting')
  assert.equal(await sbx.isRunning(), true)
  assert.equal(await sbx.pause(), true)
  assert.equal((await sbx.getInfo()).state, 'paused')
  // E2B's envd health of a paused sandbox is a 502: isRunning() is false.
  assert.equal(await sbx.isRunning(), false)
  assert.equal(await Sandbox.pause(sbx.sandboxId), false)
  const listed = await Sandbox.list({ query: { state: ['paused'] } }).nextItems()
  assert.ok(listed.some((s) => s.sandboxId === sbx.sandboxId))
  const again = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 60_000 })
  assert.equal((await again.getInfo()).state, 'running')
  assert.equal(await again.isRunning(), true)
  const nums = (await again.files.read('/home/user/n')).trim().split('\n').map(Number)
  assert.deepEqual(nums, nums.map((_, i) => i + 1))
  assert.equal((await again.commands.run('echo back')).stdout, 'back\n')
})

test('lifecycle onTimeout pause with autoResume: the lifetime ends in a pause, a command resumes it', async () => {
  const sbx = await t.create({ timeoutMs: 1_000, lifecycle: { onTimeout: 'pause', autoResume: true } })
  const info = await sbx.getInfo()
  assert.equal(info.lifecycle?.onTimeout, 'pause')
  await until(async () => (await Sandbox.getInfo(sbx.sandboxId)).state === 'paused', 'paused')
  assert.equal((await sbx.commands.run('echo awake')).stdout, 'awake\n')
})

test('pause({keepMemory: false}): the files stay, connect boots it again (a new boot id)', async () => {
  const sbx = await t.create({ timeoutMs: 120_000 })
  await sbx.files.write('/home/user/cold.txt', 'kept')
  await sbx.commands.run('sleep 1000', { background: true })
  const boot = (await sbx.commands.run('cat /proc/sys/kernel/random/boot_id')).stdout
  assert.equal(await sbx.pause({ keepMemory: false }), true)
  assert.equal(await sbx.isRunning(), false)
  assert.equal((await sbx.getInfo()).state, 'paused')
  const again = await sbx.connect()
  assert.equal(again.sandboxId, sbx.sandboxId)
  assert.equal(await again.isRunning(), true)
  assert.equal(await again.files.read('/home/user/cold.txt'), 'kept')
  assert.notEqual((await again.commands.run('cat /proc/sys/kernel/random/boot_id')).stdout, boot)
  assert.equal((await again.commands.run('pgrep -x sleep || echo none')).stdout, 'none\n')
})

test('lifecycle onTimeout {pause, keepMemory: false}: the lifetime ends in a pause of the files', async () => {
  const sbx = await t.create({ timeoutMs: 2_000,
    lifecycle: { onTimeout: { action: 'pause', keepMemory: false } } })
  await sbx.files.write('/home/user/marker', 'auto')
  await until(async () => (await Sandbox.getInfo(sbx.sandboxId)).state === 'paused', 'paused')
  await sbx.connect({ timeoutMs: 60_000 })
  assert.equal(await sbx.files.read('/home/user/marker'), 'auto')
  // E2B's own rule, kept by the daemon as by the SDK: no autoResume then.
  const res = await raw('/sandboxes', { method: 'POST',
    headers: { 'X-API-Key': KEY, 'Content-Type': 'application/json' },
    body: JSON.stringify({ templateID: 'base', autoPause: true, autoPauseMemory: false,
      autoResume: { enabled: true } }) })
  assert.equal(res.status, 400)
})

test('fork gives independent copies of the files', async () => {
  const sbx = await t.create()
  await sbx.files.write('/home/user/f.txt', 'original')
  const forks = await sbx.fork({ count: 2 })
  assert.equal(forks.length, 2)
  for (const f of forks) {
    assert.ok(f instanceof Sandbox)
    assert.equal(await f.files.read('/home/user/f.txt'), 'original')
  }
  await forks[0].files.write('/home/user/f.txt', 'changed')
  assert.equal(await forks[1].files.read('/home/user/f.txt'), 'original')
  assert.equal(await sbx.files.read('/home/user/f.txt'), 'original')
  for (const f of forks) await f.kill()
})

test('snapshots: create, start from, list, delete', async () => {
  const sbx = await t.create()
  await sbx.files.write('/home/user/s.txt', 'saved')
  const snap = await sbx.createSnapshot({ name: `sdk-${Date.now()}` })
  assert.ok(snap.snapshotId)
  const from = await t.create(snap.snapshotId)
  assert.equal(await from.files.read('/home/user/s.txt'), 'saved')
  const listed = await Sandbox.listSnapshots({ sandboxId: sbx.sandboxId }).nextItems()
  assert.deepEqual(listed.map((s) => s.snapshotId), [snap.snapshotId])
  await from.kill() // it is the lower layer of `from` until then
  assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true)
  await assert.rejects(Sandbox.create(snap.snapshotId), (e) => /not found/.test(e.message))
  await assert.rejects(Sandbox.fork('nosuchsandbox0000000', { count: 1 }), SandboxNotFoundError)
})

test('Template.exists: built-in templates, own snapshots, another tenant\'s, none', async () => {
  assert.equal(await Template.exists('base'), true)
  assert.equal(await Template.exists('code-interpreter-v1'), true)
  assert.equal(await Template.exists('no-such-template'), false)
  const r = await raw('/templates/aliases/base', { headers: { 'X-API-Key': KEY } })
  assert.deepEqual([r.status, JSON.parse(r.text)], [200, { templateID: 'base', public: true }])
  assert.equal((await raw('/templates/aliases/base')).status, 401)
  const sbx = await t.create()
  const name = `alias-${Date.now()}`
  const snap = await sbx.createSnapshot({ name })
  assert.equal(await Template.exists(snap.snapshotId), true)
  // Another tenant's: E2B's 403, which the SDK reads as "exists" (the
  // name is taken), never as one the other tenant may start from.
  const otherKey = process.env.SBX_E2B_OTHER_KEY
  assert.equal(await Template.exists(snap.snapshotId, { apiKey: otherKey }), true)
  await assert.rejects(Sandbox.create(snap.snapshotId, { apiKey: otherKey }),
    (e) => /not found/.test(e.message))
  assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true)
  assert.equal(await Template.exists(snap.snapshotId), false)
})

test('sandbox logs: lifecycle, commands and files, filtered and paged, v1 and v2, the owner\'s only', async () => {
  const sbx = await t.create()
  const id = sbx.sandboxId
  const auth = { headers: { 'X-API-Key': KEY } }
  const get = async (q) => {
    const r = await raw(`/v2/sandboxes/${id}/logs${q}`, auth)
    assert.equal(r.status, 200, r.text)
    return JSON.parse(r.text).logs
  }
  await sbx.commands.run('echo fine')
  await sbx.commands.run('exit 3').catch(() => {})
  await sbx.files.write('/home/user/logged.txt', 'x')
  // (the audit log is written behind the requests)
  const all = await until(async () => {
    const l = await get('')
    return l.some((e) => e.message.includes('logged.txt')) && l
  }, 'the file write in the logs')
  assert.equal(all[0].message, 'sandbox created')
  assert.equal(all[0].fields.tenant, 'e2b')
  for (const e of all) {
    assert.match(e.timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    assert.ok(['debug', 'info', 'warn', 'error'].includes(e.level), e.level)
    for (const v of Object.values(e.fields)) assert.equal(typeof v, 'string')
  }
  const failed = all.find((e) => /exit 3` exited with 3$/.test(e.message))
  assert.equal(failed.level, 'warn')
  assert.equal(failed.fields.kind, 'command')
  assert.ok(all.find((e) => /echo fine` exited with 0$/.test(e.message)).level === 'info')
  // level, search, direction, limit, cursor
  assert.ok((await get('?level=warn')).every((e) => e.level === 'warn' || e.level === 'error'))
  assert.deepEqual((await get('?search=exit%203')).map((e) => e.message), [failed.message])
  const back = await get('?direction=backward&limit=2')
  assert.equal(back.length, 2)
  assert.ok(back[0].timestamp >= back[1].timestamp)
  const cursor = Date.parse(failed.timestamp)
  assert.ok((await get(`?cursor=${cursor}`)).every((e) => e.timestamp >= failed.timestamp))
  // v1: lines and entries
  const v1 = JSON.parse((await raw(`/sandboxes/${id}/logs?limit=1`, auth)).text)
  // (each line a JSON object, as E2B's: `e2b sandbox logs` parses it)
  assert.equal(v1.logs.length, 1)
  assert.equal(v1.logs[0].timestamp, all[0].timestamp)
  assert.deepEqual(JSON.parse(v1.logs[0].line), {
    level: 'info', logger: 'sandbox', message: 'sandbox created', event: 'created',
    seq: all[0].fields.seq, tenant: 'e2b',
  })
  assert.equal(v1.logEntries[0].message, 'sandbox created')
  // bad input
  for (const q of ['?level=loud', '?direction=up', '?limit=1001', '?cursor=x']) {
    assert.equal((await raw(`/v2/sandboxes/${id}/logs${q}`, auth)).status, 400, q)
  }
  // another tenant's: not found, like the sandbox itself
  const other = { headers: { 'X-API-Key': process.env.SBX_E2B_OTHER_KEY } }
  assert.equal((await raw(`/v2/sandboxes/${id}/logs`, other)).status, 404)
  assert.equal((await raw(`/v2/sandboxes/${id}/logs`)).status, 401)
  // and after the kill: still the owner's to read, ending in the kill
  await sbx.kill()
  const end = await until(async () => {
    const l = await get('')
    return l.some((e) => /^sandbox killed(: |$)/.test(e.message)) && l
  }, 'the kill in the logs')
  assert.ok(end.length > all.length)
  assert.equal((await raw('/v2/sandboxes/nosuchsandbox0000000/logs', auth)).status, 404)
})
