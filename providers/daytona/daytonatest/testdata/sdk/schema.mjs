// Prints, as JSON, the wire schema that Daytona's generated OpenAPI clients
// (@daytona/api-client and @daytona/toolbox-api-client, installed with the
// SDK) were generated from: every operation (method, path, query parameter
// names, body type, answer type) and every model (fields, their types,
// which are required) and enum. The Go schema test reads it and checks the
// driver's requests and daytonatest's answers against it. Nothing of it is
// committed: it is read from node_modules each time.
//
// The generated code is regular (openapi-generator's typescript-axios), so
// plain text scanning is enough: operations from the *ParamCreator functions
// of src/api/*.js and the class signatures of src/api/*.d.ts, models from
// src/models/*.d.ts.
import { readFileSync, readdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'

const require = createRequire(import.meta.url)

// packages are the clients, by the name the schema gives them.
const packages = {
  api: '@daytona/api-client',
  toolbox: '@daytona/toolbox-api-client',
}

function srcDir(pkg) {
  return join(dirname(require.resolve(`${pkg}/package.json`)), 'src')
}

// stripComments removes /* */ and // comments.
function stripComments(s) {
  return s.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '')
}

// splitTop splits s on sep where no bracket is open.
function splitTop(s, sep) {
  const out = []
  let depth = 0
  let cur = ''
  for (const c of s) {
    if ('{<(['.includes(c)) depth++
    if ('}>)]'.includes(c)) depth--
    if (c === sep && depth === 0) {
      out.push(cur)
      cur = ''
      continue
    }
    cur += c
  }
  if (cur.trim() !== '') out.push(cur)
  return out
}

// parseType turns a TypeScript type into the schema's type tree.
function parseType(t) {
  t = t.trim()
  const union = splitTop(t, '|')
  if (union.length > 1) return { kind: 'union', of: union.map(parseType) }
  if (t.endsWith('[]')) return { kind: 'array', of: parseType(t.slice(0, -2)) }
  let m = /^Array<([\s\S]*)>$/.exec(t)
  if (m) return { kind: 'array', of: parseType(m[1]) }
  m = /^\{\s*\[key: string\]:\s*([\s\S]*?);?\s*\}$/.exec(t)
  if (m) return { kind: 'map', of: parseType(m[1]) }
  m = /^'([^']*)'$|^"([^"]*)"$/.exec(t)
  if (m) return { kind: 'literal', value: m[1] ?? m[2] }
  switch (t) {
    case 'string':
      return { kind: 'string' }
    case 'Date':
      return { kind: 'string', format: 'date-time' }
    case 'number':
      return { kind: 'number' }
    case 'boolean':
      return { kind: 'boolean' }
    case 'null':
      return { kind: 'null' }
    case 'any':
    case 'object':
    case 'File':
    case 'void':
      return { kind: 'any' }
  }
  if (/^\{[\s\S]*\}$/.test(t)) return { kind: 'object', fields: parseFields(t.slice(1, -1)) }
  if (/^\w+$/.test(t)) return { kind: 'ref', name: t }
  throw new Error(`unparsed type: ${t}`)
}

// parseFields reads an interface body: 'name'?: type; ...
function parseFields(body) {
  const fields = {}
  for (const prop of splitTop(body, ';')) {
    const m = /^\s*'?([\w$-]+)'?(\?)?\s*:\s*([\s\S]+)$/.exec(prop)
    if (!m) continue
    fields[m[1]] = { type: parseType(m[3]), required: !m[2] }
  }
  return fields
}

// bodyAfter returns the text between the brace at open and its match.
function bodyAfter(s, open) {
  let depth = 0
  for (let i = open; i < s.length; i++) {
    if (s[i] === '{') depth++
    if (s[i] === '}' && --depth === 0) return s.slice(open + 1, i)
  }
  throw new Error('unbalanced braces')
}

function readModels(dir, models, enums) {
  for (const f of readdirSync(dir).filter((f) => f.endsWith('.d.ts') && f !== 'index.d.ts')) {
    const s = stripComments(readFileSync(join(dir, f), 'utf8'))
    for (const m of s.matchAll(/export interface (\w+)\s*\{/g)) {
      models[m[1]] = parseFields(bodyAfter(s, m.index + m[0].length - 1))
    }
    for (const m of s.matchAll(/export declare const (\w+)\s*:\s*\{/g)) {
      const body = bodyAfter(s, m.index + m[0].length - 1)
      enums[m[1]] = [...body.matchAll(/readonly \w+: "([^"]*)"/g)].map((v) => v[1])
    }
    for (const m of s.matchAll(/export type (\w+) = ([^;]+);/g)) {
      if (!m[2].startsWith('typeof ')) models[m[1]] = { $alias: parseType(m[2]) }
    }
  }
}

function readOperations(name, dir, ops) {
  for (const f of readdirSync(dir).filter((f) => f.endsWith('-api.js'))) {
    const js = readFileSync(join(dir, f), 'utf8')
    const dts = stripComments(readFileSync(join(dir, f.replace(/\.js$/, '.d.ts')), 'utf8'))
    // The class's methods give the answer types.
    const answers = {}
    const cls = /export declare class \w+ extends BaseAPI[^{]*\{/.exec(dts)
    const clsBody = cls ? bodyAfter(dts, cls.index + cls[0].length - 1) : ''
    for (const m of clsBody.matchAll(/(\w+)\(([\s\S]*?)\): Promise<import\("axios"\)\.AxiosResponse<([\s\S]*?), any, \{\}, any>>;/g)) {
      answers[m[1]] = { params: m[2], answer: m[3] }
    }
    const creator = /const \w+AxiosParamCreator = function \(configuration\) \{\s*return \{/.exec(js)
    if (!creator) continue
    for (const m of js.slice(creator.index).matchAll(/\n {8}(\w+): async \(([^)]*)\) => \{([\s\S]*?)\n {8}\},/g)) {
      const [, op, , body] = m
      if (ops.some((o) => o.client === name && o.name === op)) continue
      const path = /const localVarPath = `([^`]*)`/.exec(body)?.[1]
      const method = /method: '(\w+)'/.exec(body)?.[1]
      const query = [...body.matchAll(/localVarQueryParameter\['([^']+)'\]/g)].map((q) => q[1])
      const form = [...body.matchAll(/localVarFormParams\.append\('([^']+)'/g)].map((q) => q[1])
      const dataParam = /serializeDataIfNeeded\)\((\w+),/.exec(body)?.[1]
      const sig = answers[op]
      let bodyType
      if (dataParam && sig) {
        const p = splitTop(sig.params, ',').find((p) => p.trim().startsWith(dataParam))
        if (p) bodyType = parseType(p.slice(p.indexOf(':') + 1).replace(/\?$/, ''))
      }
      ops.push({
        client: name,
        name: op,
        method,
        path,
        query: [...new Set(query)],
        form,
        body: bodyType ?? null,
        answer: sig ? parseType(sig.answer) : { kind: 'any' },
      })
    }
  }
}

const schema = { operations: [], models: {}, enums: {}, versions: {} }
for (const [name, pkg] of Object.entries(packages)) {
  const dir = srcDir(pkg)
  schema.versions[pkg] = JSON.parse(readFileSync(join(dir, '..', 'package.json'), 'utf8')).version
  const models = {}
  readModels(join(dir, 'models'), models, schema.enums)
  // The two clients name some models alike (FileInfo, Command): keep them
  // apart by client.
  schema.models[name] = models
  readOperations(name, join(dir, 'api'), schema.operations)
}
process.stdout.write(JSON.stringify(schema))
