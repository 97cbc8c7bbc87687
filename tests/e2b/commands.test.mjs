// process.Process through the SDK: streaming callbacks, exit codes,
// background commands, stdin, kill, list, connect, timeouts, users.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import os from 'node:os'
import { Sandbox, CommandExitError, TimeoutError } from 'e2b'
import { tracker, until } from './lib.mjs'

const t = tracker(Sandbox)
after(() => t.cleanup())
const sbxP = t.create({ timeoutMs: 600_000 })

test('run streams stdout and stderr to callbacks as produced', async () => {
  const sbx = await sbxP
  const out = [], err = []
  const r = await sbx.commands.run(
    'for i in 1 2 3; do echo out$i; echo err$i >&2; sleep 0.1; done',
    { onStdout: (d) => out.push(d), onStderr: (d) => err.push(d) },
  )
  assert.equal(r.exitCode, 0)
  assert.equal(r.stdout, 'out1\nout2\nout3\n')
  assert.equal(r.stderr, 'err1\nerr2\nerr3\n')
  assert.equal(out.join(''), r.stdout)
  assert.ok(out.length >= 2, 'output arrived in several pieces')
  assert.equal(err.join(''), r.stderr)
})

// run.py runs this file twice: on namespace sandboxes, then on a daemon
// whose default engine is the microVM one (SBX_E2B_ISOLATION=vm).
test('the sandbox runs on the engine the daemon was started with', async () => {
  const sbx = await sbxP
  const r = await sbx.commands.run('uname -r')
  if (process.env.SBX_E2B_ISOLATION === 'vm') {
    // Its own kernel: the one install-deps unpacked, not the host's.
    const guest = readFileSync('/usr/local/lib/sbx/vm/KERNEL', 'utf8').trim()
    assert.equal(r.stdout.trim(), guest.replace(/^linux-image-/, ''))
    assert.notEqual(r.stdout.trim(), os.release())
  } else {
    assert.equal(r.stdout.trim(), os.release())
  }
})

test('a non-zero exit is a CommandExitError with the code and output', async () => {
  const sbx = await sbxP
  await assert.rejects(sbx.commands.run('echo partial; exit 42'), (e) => {
    assert.ok(e instanceof CommandExitError)
    assert.equal(e.exitCode, 42)
    assert.equal(e.stdout, 'partial\n')
    assert.match(e.error, /exit status 42/)
    return true
  })
})

test('a command killed by a signal reports it', async () => {
  const sbx = await sbxP
  await assert.rejects(sbx.commands.run('kill -9 $$'), (e) => {
    assert.ok(e instanceof CommandExitError)
    assert.equal(e.exitCode, -1)
    return true
  })
})

test('cwd, envs and user are honoured; root on request', async () => {
  const sbx = await sbxP
  const r = await sbx.commands.run('pwd; echo $FOO; id -u; echo $HOME', {
    cwd: '/tmp', envs: { FOO: 'bar baz' },
  })
  assert.equal(r.stdout, '/tmp\nbar baz\n1000\n/home/user\n')
  const root = await sbx.commands.run('id -u; echo $HOME', { user: 'root' })
  assert.equal(root.stdout, '0\n/root\n')
  await assert.rejects(sbx.commands.run('true', { cwd: '/no/such/dir' }))
})

test('background commands: list, stdin, closeStdin, wait', async () => {
  const sbx = await sbxP
  const h = await sbx.commands.run('cat', { background: true, stdin: true })
  assert.ok(h.pid > 0)
  const listed = await sbx.commands.list()
  const me = listed.find((p) => p.pid === h.pid)
  assert.ok(me, 'the background command is listed')
  assert.equal(me.cmd, '/bin/bash')
  await sbx.commands.sendStdin(h.pid, 'line one\n')
  await sbx.commands.sendStdin(h.pid, 'line two\n')
  await sbx.commands.closeStdin(h.pid)
  const r = await h.wait()
  assert.equal(r.stdout, 'line one\nline two\n')
  assert.equal(r.exitCode, 0)
  assert.ok(!(await sbx.commands.list()).some((p) => p.pid === h.pid))
})

test('kill a background command; killing it again says false', async () => {
  const sbx = await sbxP
  const h = await sbx.commands.run('sleep 600', { background: true, timeoutMs: 0 })
  assert.equal(await sbx.commands.kill(h.pid), true)
  await assert.rejects(h.wait(), CommandExitError)
  assert.equal(await sbx.commands.kill(h.pid), false)
  assert.equal(await sbx.commands.kill(999999), false)
})

test('disconnect leaves the command running; connect reattaches and gets the end', async () => {
  const sbx = await sbxP
  const h = await sbx.commands.run('sleep 1; echo done-after-reconnect', {
    background: true, timeoutMs: 0,
  })
  await h.disconnect()
  assert.ok((await sbx.commands.list()).some((p) => p.pid === h.pid))
  const again = await sbx.commands.connect(h.pid)
  const r = await again.wait()
  assert.equal(r.exitCode, 0)
  assert.match(r.stdout, /done-after-reconnect/)
})

// The command waits for a file before each part of its output, so what
// each reader must get is fixed by the test, not by timing.
const gated = (name, n) => `echo first; while [ ! -e /tmp/${name} ]; do sleep 0.02; done; `
  + `for i in $(seq 2 ${n}); do echo line$i; sleep 0.05; done`
const allLines = (n) => 'first\n' + Array.from({ length: n - 1 }, (_, i) => `line${i + 2}\n`).join('')

test('a second reader next to the first gets every line from its attach point on', async () => {
  const sbx = await sbxP
  const first = []
  const h = await sbx.commands.run(gated('go-two-readers', 6), {
    background: true, timeoutMs: 0, onStdout: (d) => first.push(d),
  })
  await until(() => first.join('').includes('first'), 'the first line')
  const seen = []
  const second = await sbx.commands.connect(h.pid, { onStdout: (d) => seen.push(d) })
  await sbx.files.write('/tmp/go-two-readers', '')
  const [a, b] = await Promise.all([h.wait(), second.wait()])
  assert.equal(a.stdout, allLines(6))
  // Attached after "first" was read by the first reader: from there on.
  assert.equal(b.stdout.replace(/^first\n/, ''), allLines(6).replace(/^first\n/, ''))
  assert.equal(seen.join(''), b.stdout)
})

test('a reconnect after disconnect gets everything printed while nobody listened', async () => {
  const sbx = await sbxP
  // The report: 16 of 20 reconnects lost output.
  for (let trial = 0; trial < 20; trial++) {
    const got = []
    const h = await sbx.commands.run(gated(`go-reconnect-${trial}`, 6), {
      background: true, timeoutMs: 0, onStdout: (d) => got.push(d),
    })
    await until(() => got.join('').includes('first'), 'the first line')
    await h.disconnect()
    // Printed with no live reader (its predecessor's stream is dead).
    await sbx.files.write(`/tmp/go-reconnect-${trial}`, '')
    if (trial % 2) await new Promise((r) => setTimeout(r, 400))
    const again = await sbx.commands.connect(h.pid)
    const r = await again.wait()
    assert.equal(r.exitCode, 0)
    assert.equal(got.join('') + r.stdout, allLines(6), `trial ${trial}`)
  }
})

test('a command killed with its sandbox is a TimeoutError, as E2B raises', async () => {
  const own = await t.create()
  const out = []
  const h = await own.commands.run('echo started; sleep 600', {
    background: true, timeoutMs: 0, onStdout: (d) => out.push(d),
  })
  await until(() => out.join('').includes('started'), 'the first line')
  await own.kill()
  // (Connect's `unavailable`, which the SDK words as a sandbox timeout.)
  await assert.rejects(h.wait(), (e) => e instanceof TimeoutError
    && /\[unavailable\] sandbox killed: the sandbox was killed or reached its end of life/
      .test(e.message), 'a TimeoutError')
  assert.equal(out.join(''), 'started\n')
})

test('the command timeout kills the command', async () => {
  const sbx = await sbxP
  const t0 = Date.now()
  await assert.rejects(sbx.commands.run('sleep 30', { timeoutMs: 1500 }), TimeoutError)
  assert.ok(Date.now() - t0 < 15_000)
  await until(async () => !(await sbx.commands.list()).some((p) => p.cmd === '/bin/bash'
    && p.args.join(' ').includes('sleep 30')), 'the timed-out command to be gone')
})

test('the command timeout is a TimeoutError to its starter and an exit to another reader', async () => {
  const sbx = await sbxP
  const h = await sbx.commands.run('sleep 30', { background: true, timeoutMs: 1500 })
  const other = await sbx.commands.connect(h.pid, { timeoutMs: 0 })
  const [mine, theirs] = await Promise.allSettled([h.wait(), other.wait()])
  assert.ok(mine.reason instanceof TimeoutError, String(mine.reason))
  assert.ok(theirs.reason instanceof CommandExitError, String(theirs.reason))
  assert.match(theirs.reason.error, /^timed out after 1\.5s$/)
})

test('large output arrives whole', async () => {
  const sbx = await sbxP
  const r = await sbx.commands.run('head -c 3000000 /dev/zero | tr "\\0" a')
  assert.equal(r.stdout.length, 3_000_000)
})

test('many commands at once', async () => {
  const sbx = await sbxP
  const rs = await Promise.all(
    Array.from({ length: 20 }, (_, i) => sbx.commands.run(`echo ${i}`)),
  )
  rs.forEach((r, i) => assert.equal(r.stdout, `${i}\n`))
})
