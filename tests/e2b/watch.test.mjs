// filesystem.WatchDir through the SDK's files.watchDir.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, FilesystemEventType } from 'e2b'
import { tracker, until } from './lib.mjs'

const t = tracker(Sandbox)
after(() => t.cleanup())
const sbxP = t.create({ timeoutMs: 600_000 })

test('watchDir reports create, write, rename, remove with names', async () => {
  const sbx = await sbxP
  await sbx.files.makeDir('/tmp/w')
  const events = []
  const handle = await sbx.files.watchDir('/tmp/w', (e) => events.push(e), { timeoutMs: 0 })
  await sbx.files.write('/tmp/w/a.txt', 'one')
  await sbx.commands.run('echo more >> /tmp/w/a.txt; mv /tmp/w/a.txt /tmp/w/b.txt; rm /tmp/w/b.txt')
  const has = (type, name) => events.some((e) => e.type === type && e.name === name)
  await until(() => has(FilesystemEventType.REMOVE, 'b.txt'), 'the remove event')
  assert.ok(has(FilesystemEventType.CREATE, 'a.txt'), JSON.stringify(events))
  assert.ok(has(FilesystemEventType.WRITE, 'a.txt'), JSON.stringify(events))
  assert.ok(has(FilesystemEventType.RENAME, 'a.txt'), JSON.stringify(events))
  assert.ok(has(FilesystemEventType.CREATE, 'b.txt'), JSON.stringify(events))
  await handle.stop()
})

test('files.write of an existing file is a write event, as envd\'s in-place write', async () => {
  const sbx = await sbxP
  await sbx.files.makeDir('/tmp/w2')
  await sbx.files.write('/tmp/w2/f.txt', 'first')
  const events = []
  const handle = await sbx.files.watchDir('/tmp/w2', (e) => events.push(e), { timeoutMs: 0 })
  await sbx.files.write('/tmp/w2/f.txt', 'second')
  await until(() => events.some((e) => e.type === FilesystemEventType.WRITE && e.name === 'f.txt'),
    `a write event (got ${JSON.stringify(events)})`)
  // the content was replaced whole (the write is still a rename underneath)
  assert.equal(await sbx.files.read('/tmp/w2/f.txt'), 'second')
  // and an empty file is a create alone: nothing was written
  await sbx.files.write('/tmp/w2/empty.txt', '')
  await until(() => events.some((e) => e.type === FilesystemEventType.CREATE
    && e.name === 'empty.txt'), 'the create of empty.txt')
  await handle.stop()
  assert.ok(!events.some((e) => e.type === FilesystemEventType.WRITE && e.name === 'empty.txt'),
    JSON.stringify(events))
  await sbx.files.remove('/tmp/w2')
})

test('recursive watches see nested directories; others do not', async () => {
  const sbx = await sbxP
  await sbx.files.makeDir('/tmp/r/sub')
  const deep = [], flat = []
  const h1 = await sbx.files.watchDir('/tmp/r', (e) => deep.push(e), { recursive: true, timeoutMs: 0 })
  const h2 = await sbx.files.watchDir('/tmp/r', (e) => flat.push(e), { timeoutMs: 0 })
  await sbx.files.write('/tmp/r/sub/inner.txt', 'x')
  await sbx.files.write('/tmp/r/top.txt', 'x')
  await until(() => deep.some((e) => e.name === 'sub/inner.txt') && flat.some((e) => e.name === 'top.txt'),
    'nested and top-level events')
  assert.ok(!flat.some((e) => e.name.includes('inner')), JSON.stringify(flat))
  await h1.stop()
  await h2.stop()
})

test('watching a missing directory fails clearly', async () => {
  const sbx = await sbxP
  await assert.rejects(sbx.files.watchDir('/tmp/does-not-exist', () => {}))
})
