// @e2b/code-interpreter, unchanged, against sbx: its default template
// (code-interpreter-v1), POST /execute as NDJSON through E2b-Sandbox-Port
// 49999, the default context and created ones. sbx's server runs inside the
// sandbox (share/sbx/code_server.py, IPython).
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import zlib from 'node:zlib'
import { Sandbox } from '@e2b/code-interpreter'
import { tracker, raw } from './lib.mjs'

const t = tracker(Sandbox)
after(() => t.cleanup())
const sbxP = t.create({ timeoutMs: 600_000 })

test('the template is code-interpreter-v1 and state persists across runs', async () => {
  const sbx = await sbxP
  const info = await sbx.getInfo()
  assert.equal(info.templateId, 'code-interpreter-v1')
  await sbx.runCode('x = 41')
  const e = await sbx.runCode('x + 1')
  assert.equal(e.error, undefined)
  assert.equal(e.text, '42')
  assert.equal(e.results.length, 1)
  assert.equal(e.results[0].isMainResult, true)
  assert.ok(e.executionCount >= 2)
})

test('print output streams to callbacks before the run ends', async () => {
  const sbx = await sbxP
  const seen = []
  let firstAt = 0
  const t0 = Date.now()
  const e = await sbx.runCode(
    'import time\nprint("one", flush=True)\ntime.sleep(0.5)\nprint("two")\n"done"',
    { onStdout: (m) => { if (!firstAt) firstAt = Date.now(); seen.push(m.line) } },
  )
  const total = Date.now() - t0
  assert.deepEqual(e.logs.stdout, ['one\n', 'two\n'])
  assert.deepEqual(seen, ['one\n', 'two\n'])
  assert.equal(e.text, 'done')
  // The first line came while the cell still slept.
  assert.ok(firstAt - t0 < total, 'stdout arrived before the end')
})

test('a matplotlib figure comes back as a PNG, a DataFrame as an HTML table', async () => {
  const sbx = await sbxP
  const e = await sbx.runCode(
    'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.title("t")\n'
    + 'import pandas as pd\npd.DataFrame({"a": [1, 2], "b": ["x", "y"]})',
  )
  assert.equal(e.error, undefined)
  const main = e.results.find((r) => r.isMainResult)
  assert.ok(main.html.includes('<table'), main.html)
  assert.ok(main.html.includes('<th>a</th>'))
  const png = e.results.find((r) => r.png)
  assert.ok(png, 'a PNG result')
  const bytes = Buffer.from(png.png, 'base64')
  assert.deepEqual([...bytes.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
  const { width, height, pixels } = decodePng(bytes)
  // matplotlib's 6.4 x 4.8 in at 100 dpi, cropped to its content as
  // Jupyter's inline backend does (bbox_inches="tight").
  assert.ok(width > 300 && width <= 640 && height > 200 && height <= 480, `${width}x${height}`)
  assert.equal(pixels, width * height)
})

// Check a PNG all the way: signature, IHDR, and IDAT that inflates to
// exactly height rows of (1 filter byte + width pixels).
function decodePng(b) {
  assert.deepEqual([...b.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
  let off = 8, width = 0, height = 0, bpp = 0
  const idat = []
  while (off < b.length) {
    const len = b.readUInt32BE(off), type = b.toString('latin1', off + 4, off + 8)
    const data = b.subarray(off + 8, off + 8 + len)
    if (type === 'IHDR') {
      width = data.readUInt32BE(0)
      height = data.readUInt32BE(4)
      assert.equal(data[8], 8, 'bit depth')
      bpp = { 2: 3, 6: 4 }[data[9]]
      assert.ok(bpp, `color type ${data[9]}`)
    } else if (type === 'IDAT') idat.push(data)
    off += 12 + len
    if (type === 'IEND') break
  }
  const raw = zlib.inflateSync(Buffer.concat(idat))
  assert.equal(raw.length, height * (1 + width * bpp))
  return { width, height, pixels: (raw.length - height) / bpp }
}

test('errors are typed: name, value, traceback', async () => {
  const sbx = await sbxP
  const errs = []
  const e = await sbx.runCode('def f():\n    return undefined_name\nf()', { onError: (x) => errs.push(x) })
  assert.equal(e.error.name, 'NameError')
  assert.equal(e.error.value, "name 'undefined_name' is not defined")
  assert.ok(e.error.traceback.includes('undefined_name'))
  assert.equal(errs.length, 1)
  const s = await sbx.runCode('1 +')
  assert.equal(s.error.name, 'SyntaxError')
})

test('contexts are isolated; the default context is not theirs', async () => {
  const sbx = await sbxP
  const a = await sbx.createCodeContext()
  const b = await sbx.createCodeContext({ cwd: '/tmp' })
  assert.equal(b.cwd, '/tmp')
  await sbx.runCode('secret = "a"', { context: a })
  const r = await sbx.runCode('secret', { context: b })
  assert.equal(r.error.name, 'NameError')
  const d = await sbx.runCode('secret')
  assert.equal(d.error.name, 'NameError')
  const cwd = await sbx.runCode('import os; os.getcwd()', { context: b })
  assert.equal(cwd.text, '/tmp')
  const list = await sbx.listCodeContexts()
  const ids = list.map((c) => c.id)
  assert.ok(ids.includes(a.id) && ids.includes(b.id))
  await sbx.removeCodeContext(a)
  assert.ok(!(await sbx.listCodeContexts()).map((c) => c.id).includes(a.id))
  // (requestTimeoutMs: the SDK leaves its request timer running when a run
  // is refused, which would hold the test process for the default 60 s.)
  await assert.rejects(sbx.runCode('1', { context: a, requestTimeoutMs: 3000 }),
    (err) => err.name === 'NotFoundError')
})

test('a restarted context loses its state and works; env vars per run', async () => {
  const sbx = await sbxP
  const c = await sbx.createCodeContext()
  await sbx.runCode('v = 1', { context: c })
  await sbx.restartCodeContext(c)
  const r = await sbx.runCode('v', { context: c })
  assert.equal(r.error.name, 'NameError')
  const e = await sbx.runCode('import os; os.environ["GREETING"]', { context: c, envs: { GREETING: 'hi' } })
  assert.equal(e.text, 'hi')
  const after = await sbx.runCode('import os; os.environ.get("GREETING", "unset")', { context: c })
  assert.equal(after.text, 'unset')
})

test("the sandbox's envs reach runCode as they reach commands", async () => {
  // The server (and its default context) were warmed in the pool, before
  // the sandbox had an environment: os.getenv was None (issue 17).
  const sbx = await t.create({ envs: { SBX_CREATE_ENV: 'from-create', GREETING: 'base' } })
  const cmd = await sbx.commands.run('echo $SBX_CREATE_ENV')
  assert.equal(cmd.stdout, 'from-create\n')
  const d = await sbx.runCode('import os; os.getenv("SBX_CREATE_ENV")')
  assert.equal(d.text, 'from-create')
  const c = await sbx.createCodeContext()
  const r = await sbx.runCode('import os; os.environ["SBX_CREATE_ENV"]', { context: c })
  assert.equal(r.text, 'from-create')
  // A run's own envs win for that run; the sandbox's come back after it.
  const o = await sbx.runCode('import os; os.environ["GREETING"]', { envs: { GREETING: 'run' } })
  assert.equal(o.text, 'run')
  const b = await sbx.runCode('import os; os.environ["GREETING"]')
  assert.equal(b.text, 'base')
})

test('bash contexts: state kept between runs, output streamed, envs, errors', async () => {
  const sbx = await t.create({ envs: { SBX_CREATE_ENV: 'from-create' } })
  // the default bash context and one of its own, cwd given
  const first = await sbx.runCode('X=kept; cd /tmp; echo "$SBX_CREATE_ENV"', { language: 'bash' })
  assert.deepEqual(first.logs.stdout, ['from-create\n'])
  assert.equal(first.error, undefined)
  const again = await sbx.runCode('echo "$X $PWD"', { language: 'bash' })
  assert.deepEqual(again.logs.stdout, ['kept /tmp\n'])
  const own = await sbx.createCodeContext({ language: 'bash', cwd: '/home/user' })
  assert.equal(own.language, 'bash')
  const pwd = await sbx.runCode('pwd; echo "${X:-unset}"', { context: own })
  assert.equal(pwd.logs.stdout.join(''), '/home/user\nunset\n')
  // a run's envs are that run's only
  const withEnv = await sbx.runCode('echo $FOO', { language: 'bash', envs: { FOO: 'bar' } })
  assert.deepEqual(withEnv.logs.stdout, ['bar\n'])
  const after = await sbx.runCode('echo ${FOO:-default}', { language: 'bash' })
  assert.deepEqual(after.logs.stdout, ['default\n'])
  // streamed as written, stderr apart
  const seen = []
  await sbx.runCode('echo one; sleep 1; echo two >&2', {
    language: 'bash', onStdout: (m) => seen.push(['out', m.line]), onStderr: (m) => seen.push(['err', m.line]),
  })
  assert.deepEqual(seen.map((x) => x[0]), ['out', 'err'])
  // a failing cell is the result's error; a syntax error is the cell's,
  // and a command reading stdin gets none (the shell goes on)
  const bad = await sbx.runCode('false', { language: 'bash' })
  assert.deepEqual([bad.error.name, bad.error.value], ['BashError', 'exit status 1'])
  const syntax = await sbx.runCode('if then', { language: 'bash' })
  assert.equal(syntax.error.name, 'BashError')
  assert.match(syntax.logs.stderr.join(''), /syntax error/)
  const stdin = await sbx.runCode('read -r line; echo "got:${line}:$?"', { language: 'bash' })
  assert.deepEqual(stdin.logs.stdout, ['got::1\n'])
  // `exit` ends the shell: said, and the next run has a new one
  const gone = await sbx.runCode('exit 3', { language: 'bash' })
  assert.match(gone.error.value, /bash exited with status 3/)
  const fresh = await sbx.runCode('echo "${X:-new shell}"', { language: 'bash' })
  assert.deepEqual(fresh.logs.stdout, ['new shell\n'])
  // the languages not installed are a 400 (the SDK shows the status only;
  // the message names the ones there are)
  await assert.rejects(sbx.runCode('1', { language: 'cobol' }), /400/)
})

test('JavaScript and TypeScript contexts: results, state, envs, output, errors', async () => {
  const sbx = await t.create({ envs: { SBX_CREATE_ENV: 'from-create' } })
  // E2B lists a default JavaScript context beside Python's from the start
  const listed = (await sbx.listCodeContexts()).map((c) => c.language)
  assert.ok(listed.includes('python') && listed.includes('javascript'), listed)
  const hello = await sbx.runCode('console.log("Hello, World!")', { language: 'js' })
  assert.deepEqual(hello.logs.stdout, ['Hello, World!\n'])
  assert.equal((await sbx.runCode('const add = (x, y) => x + y;\nadd(1, 2)', { language: 'js' })).text, '3')
  assert.equal((await sbx.runCode('add(2, 2)', { language: 'javascript' })).text, '4')
  const awaited = await sbx.runCode('async function main() { return "Hello" }\nawait main()', { language: 'js' })
  assert.equal(awaited.text, 'Hello')
  assert.equal((await sbx.runCode('process.cwd()', { language: 'js' })).text, '/home/user')
  const own = await sbx.createCodeContext({ cwd: '/tmp', language: 'js' })
  assert.equal(own.language, 'javascript')
  assert.equal((await sbx.runCode('process.cwd() + " " + typeof add', { context: own })).text, '/tmp undefined')
  // the sandbox's envs for good, a run's for that run
  assert.equal((await sbx.runCode('process.env.SBX_CREATE_ENV', { language: 'js' })).text, 'from-create')
  const withEnv = await sbx.runCode('process.env.FOO', { language: 'js', envs: { FOO: 'bar' } })
  assert.equal(withEnv.text, 'bar')
  assert.equal((await sbx.runCode("process.env.FOO || 'default'", { language: 'js' })).text, 'default')
  const err = await sbx.runCode('throw new RangeError("out")', { language: 'js' })
  assert.deepEqual([err.error.name, err.error.value], ['RangeError', 'out'])
  const ts = await sbx.runCode('function subtract(x: number, y: number): number {\n  return x - y;\n}\nsubtract(1, 2)',
    { language: 'ts' })
  assert.equal(ts.text, '-1')
  // the timeout interrupts the cell; the state stays
  await assert.rejects(sbx.runCode('while (true) {}', { language: 'js', timeoutMs: 1000 }))
  assert.equal((await sbx.runCode('add(1, 1)', { language: 'js' })).text, '2')
})

test('Java contexts: results, state, envs as system properties, errors', async () => {
  const sbx = await t.create({ envs: { SBX_CREATE_ENV: 'from-create' } })
  assert.equal((await sbx.runCode('System.getProperty("SBX_CREATE_ENV")', { language: 'java' })).text, 'from-create')
  assert.equal((await sbx.runCode('System.getProperty("user.dir")', { language: 'java' })).text, '/home/user')
  const own = await sbx.runCode('System.getProperty("FOO")', { language: 'java', envs: { FOO: 'bar' } })
  assert.equal(own.text, 'bar')
  assert.equal((await sbx.runCode('System.getProperty("FOO", "default")', { language: 'java' })).text, 'default')
  await sbx.runCode('int square(int v) { return v * v; }', { language: 'java' })
  const out = await sbx.runCode('System.out.println("hi"); square(7)', { language: 'java' })
  assert.deepEqual([out.logs.stdout, out.text], [['hi\n'], '49'])
  const err = await sbx.runCode('Integer.parseInt("x")', { language: 'java' })
  assert.equal(err.error.name, 'java.lang.NumberFormatException')
})

test('R contexts: values as R prints them, state, envs, cwd', async () => {
  const sbx = await t.create({ envs: { SBX_CREATE_ENV: 'from-create' } })
  assert.equal((await sbx.runCode('Sys.getenv("SBX_CREATE_ENV")', { language: 'r' })).text, '[1] "from-create"')
  const own = await sbx.runCode('Sys.getenv("FOO")', { language: 'r', envs: { FOO: 'bar' } })
  assert.equal(own.text, '[1] "bar"')
  assert.equal((await sbx.runCode('Sys.getenv("FOO", unset = "default")', { language: 'r' })).text, '[1] "default"')
  assert.equal((await sbx.runCode('getwd()', { language: 'r' })).text, '[1] "/home/user"')
  await sbx.runCode('v <- c(1, 2, 3)', { language: 'r' })
  const sum = await sbx.runCode('cat("total\\n"); sum(v)', { language: 'r' })
  assert.deepEqual([sum.logs.stdout, sum.text], [['total\n'], '[1] 6'])
  const err = await sbx.runCode('stop("no")', { language: 'r' })
  assert.deepEqual([err.error.name, err.error.value], ['simpleError', 'no'])
  const ctx = await sbx.createCodeContext({ language: 'r', cwd: '/tmp' })
  assert.equal((await sbx.runCode('paste(getwd(), exists("v"))', { context: ctx })).text, '[1] "/tmp FALSE"')
})

test('a crashed interpreter is reported, and the context restarts', async () => {
  const sbx = await sbxP
  const c = await sbx.createCodeContext()
  const e = await sbx.runCode('import ctypes; ctypes.string_at(0)', { context: c })
  assert.equal(e.error.name, 'ContextDied')
  assert.match(e.error.value, /signal 11 \(SIGSEGV\)/)
  const again = await sbx.runCode('1', { context: c })
  assert.equal(again.error.name, 'ContextDied')
  await sbx.restartCodeContext(c)
  assert.equal((await sbx.runCode('2 + 2', { context: c })).text, '4')
})

test('the code plane needs the sandbox credential', async () => {
  const sbx = await sbxP
  const h = { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49999', 'Content-Type': 'application/json' }
  const noauth = await raw('/execute', { method: 'POST', headers: h, body: '{"code":"1"}' })
  assert.equal(noauth.status, 401)
  const wrong = await raw('/contexts', { headers: { ...h, 'X-Access-Token': 'x'.repeat(40) } })
  assert.equal(wrong.status, 401)
  const ok = await raw('/contexts', { headers: { ...h, 'X-Access-Token': sbx.envdAccessToken ?? (await Sandbox.connect(sbx.sandboxId)).envdAccessToken } })
  assert.equal(ok.status, 200)
})
