// PTY sessions through the SDK: create, input, resize, kill.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'
import { tracker, until } from './lib.mjs'

const t = tracker(Sandbox)
after(() => t.cleanup())

test('a pty runs an interactive shell: input, output, resize, kill', async () => {
  const sbx = await t.create({ timeoutMs: 300_000 })
  let out = ''
  const dec = new TextDecoder()
  const pty = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { out += dec.decode(d) }, timeoutMs: 0 })
  assert.ok(pty.pid > 0)
  await sbx.pty.sendInput(pty.pid, new TextEncoder().encode('tty; stty size; echo mark-$((6*7))\n'))
  await until(() => out.includes('mark-42'), 'the shell to answer')
  assert.match(out, /\/dev\/pts\/\d+/)
  assert.match(out, /24 80/)
  await sbx.pty.resize(pty.pid, { cols: 100, rows: 30 })
  await sbx.pty.sendInput(pty.pid, new TextEncoder().encode('stty size; echo mark-two\n'))
  await until(() => out.includes('mark-two') && /30 100/.test(out), 'the new size')
  assert.equal(await sbx.pty.kill(pty.pid), true)
  await assert.rejects(pty.wait())
  assert.ok(!(await sbx.commands.list()).some((p) => p.pid === pty.pid))
})

test('a pty exits with its shell', async () => {
  const sbx = await t.create()
  const pty = await sbx.pty.create({ cols: 40, rows: 10, onData: () => {}, timeoutMs: 0 })
  await sbx.pty.sendInput(pty.pid, new TextEncoder().encode('exit 3\n'))
  await assert.rejects(pty.wait(), (e) => e.exitCode === 3)
})

test('a pty reconnect after disconnect gets what the shell printed meanwhile', async () => {
  const sbx = await t.create({ timeoutMs: 300_000 })
  const dec = new TextDecoder()
  let before = ''
  const pty = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { before += dec.decode(d) }, timeoutMs: 0 })
  await sbx.pty.sendInput(pty.pid, new TextEncoder().encode(
    'stty -echo; echo ready-$((1+1)); while [ ! -e /tmp/go-pty ]; do sleep 0.02; done; '
    + 'for i in 1 2 3 4 5; do echo after-$((i*11)); sleep 0.05; done\n'))
  await until(() => before.includes('ready-2'), 'the shell to answer')
  await pty.disconnect()
  await sbx.files.write('/tmp/go-pty', '')
  await new Promise((r) => setTimeout(r, 500))
  let after = ''
  const again = await sbx.pty.connect(pty.pid, { onData: (d) => { after += dec.decode(d) } })
  await until(() => after.includes('after-55'), 'the output printed while nobody listened')
  for (const n of [11, 22, 33, 44, 55]) assert.ok(after.includes(`after-${n}`), after)
  assert.ok(!before.includes('after-11'))
  assert.equal(await sbx.pty.kill(pty.pid), true)
  await assert.rejects(again.wait())
})
