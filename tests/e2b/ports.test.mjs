// sandbox.getHost(port): an HTTP server started inside a sandbox, reached
// through sbx's port (Host PORT-ID.DOMAIN), by its tenant or a holder of
// its traffic token only.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import { Sandbox } from 'e2b'
import { tracker, until, API, KEY, DOMAIN } from './lib.mjs'

const t = tracker(Sandbox)
after(() => t.cleanup())

// fetch() cannot set Host: a plain request to the daemon with that Host.
function get(host, headers = {}) {
  const u = new URL(API)
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, path: '/hello.txt', method: 'GET',
      headers: { Host: host, ...headers } }, (res) => {
      let body = ''
      res.on('data', (d) => { body += d })
      res.on('end', () => resolve({ status: res.statusCode, body }))
    })
    req.on('error', reject)
    req.end()
  })
}

test('getHost reaches a server started in the sandbox', async () => {
  const sbx = await t.create({ timeoutMs: 300_000 })
  await sbx.files.write('/home/user/site/hello.txt', 'hello from inside')
  await sbx.commands.run('/usr/bin/python3 -m http.server 8000 --bind 127.0.0.1', {
    background: true, cwd: '/home/user/site', timeoutMs: 0,
  })
  const host = sbx.getHost(8000)
  assert.equal(host, `8000-${sbx.sandboxId}.${DOMAIN}`)
  const info = await Sandbox.connect(sbx.sandboxId)
  const token = info.trafficAccessToken
  assert.ok(token, 'create/connect hands out a traffic token')
  const r = await until(async () => {
    const x = await get(host, { 'E2b-Traffic-Access-Token': token })
    return x.status === 200 ? x : null
  }, 'the server to listen')
  assert.equal(r.body, 'hello from inside')
  assert.equal((await get(host, { 'X-API-Key': KEY })).status, 200)
  assert.equal((await get(host)).status, 401)
  assert.equal((await get(host, { 'E2b-Traffic-Access-Token': 'x'.repeat(40) })).status, 401)
  assert.equal((await get(`8001-${sbx.sandboxId}.${DOMAIN}`, { 'X-API-Key': KEY })).status, 502)
})
