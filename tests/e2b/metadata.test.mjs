// File metadata through the SDK: writes with `metadata` become user.e2b.*
// extended attributes, which getInfo, list and rename show back (docs/e2b.md).
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, InvalidArgumentError } from 'e2b'
import { tracker } from './lib.mjs'

const t = tracker(Sandbox)
after(() => t.cleanup())
const sbxP = t.create({ timeoutMs: 600_000 })

test('write, writeFiles (multipart and octet-stream) and gzip keep metadata', async () => {
  const sbx = await sbxP
  const meta = { owner: 'agent-7', note: 'draft 1 (of 3)' }
  const one = await sbx.files.write('/home/user/md/one.txt', 'one', { metadata: meta })
  assert.deepEqual(one.metadata, meta)
  assert.deepEqual((await sbx.files.getInfo('/home/user/md/one.txt')).metadata, meta)
  const raw = await sbx.files.write('md/raw.txt', 'raw', { metadata: meta, useOctetStream: true })
  assert.deepEqual(raw.metadata, meta)
  const gz = await sbx.files.write('md/gz.txt', 'gz '.repeat(1000), { metadata: { z: '1' }, gzip: true })
  assert.deepEqual(gz.metadata, { z: '1' })
  assert.deepEqual((await sbx.files.getInfo('md/gz.txt')).metadata, { z: '1' })
  for (const useOctetStream of [false, true]) {
    const infos = await sbx.files.writeFiles([
      { path: `/tmp/many${useOctetStream}/a`, data: 'A' },
      { path: `/tmp/many${useOctetStream}/b`, data: 'B' },
      { path: `/tmp/many${useOctetStream}/c`, data: 'C' },
    ], { metadata: { batch: 'x' }, useOctetStream })
    assert.equal(infos.length, 3)
    for (const info of infos) {
      assert.deepEqual(info.metadata, { batch: 'x' })
      assert.deepEqual((await sbx.files.getInfo(info.path)).metadata, { batch: 'x' })
    }
  }
  // Without metadata there is none.
  const plain = await sbx.files.write('/tmp/plain.txt', 'p')
  assert.equal(plain.metadata, undefined)
  assert.equal((await sbx.files.getInfo('/tmp/plain.txt')).metadata, undefined)
})

test('list and rename show it; an overwrite without metadata clears it', async () => {
  const sbx = await sbxP
  await sbx.files.makeDir('/tmp/ls')
  await sbx.files.write('/tmp/ls/tagged', 't', { metadata: { tag: 'listed' } })
  await sbx.files.write('/tmp/ls/untagged', 'u')
  const entries = await sbx.files.list('/tmp/ls')
  const byName = Object.fromEntries(entries.map((e) => [e.name, e.metadata]))
  assert.deepEqual(byName, { tagged: { tag: 'listed' }, untagged: undefined })
  const moved = await sbx.files.rename('/tmp/ls/tagged', '/tmp/ls/renamed')
  assert.deepEqual(moved.metadata, { tag: 'listed' })
  // across /tmp and /home/user the move is a copy: the metadata goes along
  const across = await sbx.files.rename('/tmp/ls/renamed', '/home/user/renamed')
  assert.deepEqual(across.metadata, { tag: 'listed' })
  const again = await sbx.files.write('/home/user/renamed', 'new content')
  assert.equal(again.metadata, undefined)
  assert.equal((await sbx.files.getInfo('/home/user/renamed')).metadata, undefined)
  await sbx.files.write('/home/user/renamed', 'newer', { metadata: { b: '2' } })
  assert.deepEqual((await sbx.files.getInfo('/home/user/renamed')).metadata, { b: '2' })
})

test('attributes set inside the sandbox show up; bad metadata is refused with no file', async () => {
  const sbx = await sbxP
  await sbx.files.write('/home/user/oob.txt', 'x')
  await sbx.commands.run(`python3 -c "import os; os.setxattr('/home/user/oob.txt', 'user.e2b.by', b'python'); os.setxattr('/home/user/oob.txt', 'user.mine', b'not ours')"`)
  assert.deepEqual((await sbx.files.getInfo('/home/user/oob.txt')).metadata, { by: 'python' })
  // the SDK's own checks
  await assert.rejects(sbx.files.write('/tmp/bad.txt', 'x', { metadata: { 'a b': 'v' } }), InvalidArgumentError)
  await assert.rejects(sbx.files.write('/tmp/bad.txt', 'x', { metadata: { k: 'caf\u00e9' } }), InvalidArgumentError)
  // sbx's bounds (docs/e2b.md)
  await assert.rejects(sbx.files.write('/tmp/bad.txt', 'x', { metadata: { ['k'.repeat(65)]: 'v' } }),
    (e) => e instanceof InvalidArgumentError && /metadata key/.test(e.message))
  await assert.rejects(sbx.files.write('/tmp/bad.txt', 'x', { metadata: { k: 'v'.repeat(1025) } }),
    (e) => e instanceof InvalidArgumentError && /at most 1024/.test(e.message))
  await assert.rejects(sbx.files.writeFiles([{ path: '/tmp/bad1.txt', data: 'x' }, { path: '/tmp/bad2.txt', data: 'y' }],
    { metadata: Object.fromEntries(Array.from({ length: 5 }, (_, i) => ['key' + i, 'v'.repeat(1000)])) }),
    (e) => e instanceof InvalidArgumentError && /at most 4096 bytes/.test(e.message))
  for (const p of ['/tmp/bad.txt', '/tmp/bad1.txt', '/tmp/bad2.txt'])
    assert.equal(await sbx.files.exists(p), false, p)
})
