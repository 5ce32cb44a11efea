// deploy/kubernetes/ checked without a cluster (issue 18; docs/operations.md,
// "Kubernetes"): every document against Kubernetes' own schemas
// (kubernetes-models, pinned in ../package.json), with fields the schemas do
// not know refused as the API server's strict field validation would; then
// what the design needs of the manifests that no schema can say: the
// DaemonSet's flags, probes and ports agree with the daemon's config, the
// Secret files it mounts exist and have the modes corral accepts, the
// NetworkPolicy selects the pods. Negative controls show that the checks
// reject broken copies.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, '..', '..', '..');
const manifestDir = join(repo, 'deploy', 'kubernetes');
const nodeModules = resolve(here, '..', 'node_modules');

// apiVersion/kind -> the kubernetes-models module of that kind. A kind not
// listed here fails the test: add it deliberately, with its checks.
const MODELS = {
  'v1/Namespace': 'kubernetes-models/v1/Namespace',
  'v1/ConfigMap': 'kubernetes-models/v1/ConfigMap',
  'v1/Secret': 'kubernetes-models/v1/Secret',
  'v1/Service': 'kubernetes-models/v1/Service',
  'apps/v1/DaemonSet': 'kubernetes-models/apps/v1/DaemonSet',
  'apps/v1/StatefulSet': 'kubernetes-models/apps/v1/StatefulSet',
  'networking.k8s.io/v1/NetworkPolicy': 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy',
};
// Not a Kubernetes object: kustomize's own file, checked by its own test.
const KUSTOMIZATION = 'kustomize.config.k8s.io/v1beta1/Kustomization';

// kubectl reads manifests as YAML 1.1 (sigs.k8s.io/yaml); corral's own
// config as YAML 1.2 (yaml-cpp).
function parseAll(text, version, where) {
  return YAML.parseAllDocuments(text, { version }).map((doc, i) => {
    assert.deepEqual(doc.errors, [], `${where} document ${i + 1}: YAML errors`);
    return doc.toJS();
  }).filter((d) => d !== null);
}

function loadManifests() {
  const files = readdirSync(manifestDir, { recursive: true }).filter((f) => f.endsWith('.yaml')).sort();
  const out = [];
  for (const file of files) {
    const text = readFileSync(join(manifestDir, file), 'utf8');
    parseAll(text, '1.1', file).forEach((doc, index) => out.push({ file, index, doc }));
  }
  return out;
}

const manifests = loadManifests();
const typeOf = (doc) => `${doc.apiVersion}/${doc.kind}`;
const objects = manifests.filter((m) => typeOf(m.doc) !== KUSTOMIZATION);
const one = (kind, name, file) => {
  const found = objects.filter((m) => m.doc.kind === kind && m.doc.metadata?.name === name &&
                                      (file === undefined || m.file === file));
  assert.equal(found.length, 1, `exactly one ${kind} ${name}${file ? ' in ' + file : ''}`);
  return found[0].doc;
};

// --- strict fields ---------------------------------------------------------
// The schemas accept any extra property, so a misspelt field (hostNetwrk)
// would pass validate(). The field names come from kubernetes-models' type
// declarations (.d.ts), one interface per file, which name every field of
// every type and the type of each.
const interfaces = new Map();

function readInterface(file) {
  if (interfaces.has(file)) return interfaces.get(file);
  const text = readFileSync(file, 'utf8');
  const imports = new Map();
  for (const m of text.matchAll(/^import \{([^}]*)\} from "([^"]+)";$/gm)) {
    const target = m[2].startsWith('.') ? resolve(dirname(file), m[2] + '.d.ts')
                                        : join(nodeModules, m[2] + '.d.ts');
    for (const name of m[1].split(',').map((s) => s.trim()).filter(Boolean))
      imports.set(name.split(/\s+as\s+/).pop(), target);
  }
  const lines = text.split('\n');
  const start = lines.findIndex((l) => /^export interface I\w+ .*\{$/.test(l));
  // null: not an object type (a string, IntOrString, Quantity)
  const fields = start < 0 ? null : parseObject(lines, start + 1, 4).fields;
  const entry = { fields, imports };
  interfaces.set(file, entry);
  return entry;
}

// The properties of an object type whose first line is lines[i], each at
// `indent` spaces, up to its closing brace. A property's type is a string
// (a type name, Array<name>, a primitive or a literal) or, when written
// inline, {map: type}, {object: fields} or {array: type}.
function parseObject(lines, i, indent) {
  const fields = new Map();
  const property = new RegExp(`^ {${indent}}"([^"]+)"\\??: (.*)$`);
  const closing = ' '.repeat(indent - 4) + '}';
  for (; i < lines.length && !lines[i].startsWith(closing); ++i) {
    const p = lines[i].match(property);
    if (!p) continue;
    let type = p[2].replace(/;$/, '');
    if (type === '{' || type === 'Array<{') {
      const map = lines[i + 1].match(/^\s+\[key: string\]: (.*);$/);
      let inner;
      if (map) {
        inner = { map: map[1] };
      } else {
        const nested = parseObject(lines, i + 1, indent + 4);
        inner = { object: nested.fields };
        i = nested.end;
      }
      type = type === '{' ? inner : { array: inner };
    }
    fields.set(p[1], type);
  }
  return { fields, end: i };
}

function checkValue(value, type, imports, path, errors) {
  if (value === null || value === undefined) return;
  if (typeof type === 'object') {
    if (type.map) {
      for (const [k, v] of Object.entries(value)) checkValue(v, type.map, imports, `${path}.${k}`, errors);
    } else if (type.object) {
      checkObject(value, type.object, imports, path, errors);
    } else if (Array.isArray(value)) {
      value.forEach((v, i) => checkValue(v, type.array, imports, `${path}[${i}]`, errors));
    }
    return;
  }
  const array = type.match(/^Array<(.*)>$/);
  if (array) {
    if (Array.isArray(value)) value.forEach((v, i) => checkValue(v, array[1], imports, `${path}[${i}]`, errors));
    return;
  }
  const target = imports.get(type);
  if (target) {
    const { fields, imports: theirs } = readInterface(target);
    if (fields !== null) checkObject(value, fields, theirs, path, errors);
  }
}

function checkObject(value, fields, imports, path, errors) {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return;
  for (const [k, v] of Object.entries(value)) {
    if (!fields.has(k)) {
      errors.push(`${path}.${k}: unknown field (known: ${[...fields.keys()].join(', ')})`);
      continue;
    }
    checkValue(v, fields.get(k), imports, `${path}.${k}`, errors);
  }
}

// validate() (the schema) and the strict field check; throws on either.
async function check(doc) {
  const module = MODELS[typeOf(doc)];
  if (!module) throw new Error(`${typeOf(doc)}: a kind this test does not know`);
  const Model = (await import(module))[doc.kind];
  new Model(doc).validate();
  const errors = [];
  const { fields, imports } = readInterface(join(nodeModules, module + '.d.ts'));
  checkObject(doc, fields, imports, doc.kind, errors);
  if (errors.length) throw new Error(`unknown fields:\n  ${errors.join('\n  ')}`);
}

// --- the design's checks ------------------------------------------------------
// Each takes the manifests (a bundle, so that a negative control can pass a
// broken copy) and returns what is wrong, [] when nothing is.
const real = {
  daemonSet: one('DaemonSet', 'corral', 'daemonset.yaml'),
  configMap: one('ConfigMap', 'corral-config', 'configmap.yaml'),
  service: one('Service', 'corral', 'service.yaml'),
  secret: one('Secret', 'corral-secrets', 'secrets.example.yaml'),
  policy: one('NetworkPolicy', 'corral', 'networkpolicy.yaml'),
  postgres: one('StatefulSet', 'corral-postgres', 'postgres.example.yaml'),
  pgService: one('Service', 'corral-postgres', 'postgres.example.yaml'),
};

const selects = (selector, labels) =>
  Object.entries(selector?.matchLabels ?? {}).every(([k, v]) => labels?.[k] === v) &&
  (selector?.matchExpressions ?? []).length === 0;

// The parts of a bundle the checks look at.
function view(b) {
  const podSpec = b.daemonSet.spec.template.spec;
  const container = podSpec.containers.find((c) => c.name === 'corral');
  const corral = parseAll(b.configMap.data['corral.yaml'], '1.2', 'corral.yaml')[0] ?? {};
  const serve = corral.serve ?? {};
  const argAfter = (flag) => {
    const i = container.args.indexOf(flag);
    return i < 0 ? undefined : container.args[i + 1];
  };
  return {
    podSpec, container, corral, serve, argAfter,
    pods: b.daemonSet.spec.template.metadata.labels,
    pgPods: b.postgres.spec.template.metadata.labels,
    port: Number(String(serve.listen).split(':').pop()),
    mountAt: (path) => container.volumeMounts.filter((m) => m.mountPath === path),
    volume: (name) => podSpec.volumes.find((v) => v.name === name),
  };
}

const problems = (list) => list.filter(([ok]) => !ok).map(([, what]) => what);

// serve with the config file, --node-id $(NODE_NAME), --node-address
// $(POD_IP):<listen port>, both variables from the downward API.
function flagProblems(b) {
  const v = view(b);
  const env = Object.fromEntries((v.container.env ?? []).map((e) => [e.name, e.valueFrom?.fieldRef?.fieldPath]));
  const config = v.mountAt(v.argAfter('--config'));
  return problems([
    [v.container.args[0] === 'serve', 'the container does not run serve'],
    [v.argAfter('--node-id') === '$(NODE_NAME)', '--node-id is not $(NODE_NAME)'],
    [v.argAfter('--node-address') === `$(POD_IP):${v.port}`, `--node-address is not $(POD_IP):${v.port}`],
    [env.NODE_NAME === 'spec.nodeName', 'NODE_NAME is not the downward API spec.nodeName'],
    [env.POD_IP === 'status.podIP', 'POD_IP is not the downward API status.podIP'],
    [config.length === 1 && v.volume(config[0].name)?.configMap?.name === b.configMap.metadata.name &&
     config[0].subPath === 'corral.yaml', 'the --config file is not the ConfigMap\'s corral.yaml'],
  ]);
}

function probeProblems(b) {
  const v = view(b);
  return ['readinessProbe', 'livenessProbe', 'startupProbe'].flatMap((probe) => {
    const get = v.container[probe]?.httpGet;
    return problems([
      // Readiness follows the node's heartbeat (/readyz); liveness and
      // startup only that the daemon answers (/healthz).
      [get?.path === (probe === 'readinessProbe' ? '/readyz' : '/healthz'),
       `${probe} is not GET ${probe === 'readinessProbe' ? '/readyz' : '/healthz'}`],
      [get?.port === v.port, `${probe} is not on port ${v.port}`],
      [get?.scheme === undefined || get?.scheme === 'HTTP', `${probe} is not plain HTTP`],
    ]);
  });
}

// One port: serve.listen, the container port, the Service's targetPort.
function portProblems(b) {
  const v = view(b);
  const ports = b.service.spec.ports;
  return problems([
    [/^0\.0\.0\.0:\d+$/.test(v.serve.listen), 'serve.listen is not 0.0.0.0:<port> (the pod IP)'],
    [v.container.ports.length === 1 && v.container.ports[0].containerPort === v.port,
     `the container port is not serve.listen's ${v.port}`],
    [ports.length === 1 && ports[0].targetPort === v.port, `the Service's targetPort is not ${v.port}`],
    [selects({ matchLabels: b.service.spec.selector }, v.pods), 'the Service does not select the pods'],
    [selects(b.daemonSet.spec.selector, v.pods), 'the DaemonSet selector does not match its pods'],
  ]);
}

// Every serve.* key of corral.yaml is one docs/config.md's table documents.
const configDoc = readFileSync(join(repo, 'docs', 'config.md'), 'utf8');
const documentedKeys = (() => {
  const start = configDoc.indexOf('### `serve` keys');
  const table = configDoc.slice(start, configDoc.indexOf('What each key sets', start));
  // The first cell of each row: one key or several (`a`, `b`).
  return new Set(table.split('\n').filter((l) => l.startsWith('| `'))
    .flatMap((l) => [...l.split('|')[1].matchAll(/`([^`]+)`/g)].map((m) => m[1])));
})();

function configKeyProblems(b) {
  const v = view(b);
  const out = Object.keys(v.corral).filter((k) => k !== 'serve' && k !== 'sandbox')
    .map((k) => `${k}: not a top-level key`);
  const walk = (obj, prefix) => {
    for (const [k, value] of Object.entries(obj)) {
      const key = prefix + k;
      if (documentedKeys.has(key)) continue;
      if (value && typeof value === 'object' && !Array.isArray(value) &&
          [...documentedKeys].some((known) => known.startsWith(key + '.'))) walk(value, key + '.');
      else out.push(`serve.${key}: not in docs/config.md`);
    }
  };
  walk(v.serve, '');
  return out;
}

// The key files corral.yaml names are the Secret's keys, each mounted by
// subPath (a Secret volume's own files are symlinks, key -> ..data/key, and
// corral opens key files with O_NOFOLLOW: src/daemon/api_keys.cc,
// cluster_key.cc, node_setup.cc), read-only, with no access for group or
// others and owned by root (no fsGroup), as corral demands of them.
function secretProblems(b) {
  const v = view(b);
  const out = [];
  const files = [v.serve.state_url_file, v.serve.cluster_key_file, ...(v.serve.api_keys?.files ?? [])];
  const keys = new Set(Object.keys(b.secret.stringData ?? {}).concat(Object.keys(b.secret.data ?? {})));
  for (const file of files) {
    const mounts = v.mountAt(file);
    if (mounts.length !== 1) { out.push(`${file} is not mounted (once)`); continue; }
    const vol = v.volume(mounts[0].name);
    if (vol?.secret?.secretName !== b.secret.metadata.name) out.push(`${file} is not from the Secret`);
    if (!mounts[0].subPath) out.push(`${file} is not mounted by subPath: it would be a symlink`);
    if (mounts[0].readOnly !== true) out.push(`${file} is not read-only`);
  }
  for (const m of v.container.volumeMounts.filter((m) => v.volume(m.name)?.secret)) {
    if (!keys.has(m.subPath)) out.push(`the Secret key ${m.subPath} the DaemonSet mounts is not in the example Secret`);
  }
  for (const { name, secret: s } of v.podSpec.volumes.filter((x) => x.secret)) {
    const modes = [s.defaultMode ?? 0o644, ...(s.items ?? []).map((i) => i.mode ?? s.defaultMode ?? 0o644)];
    for (const mode of modes) {
      if (mode & 0o077) out.push(`volume ${name}: mode 0${mode.toString(8)} gives group or others access`);
      if (!(mode & 0o400)) out.push(`volume ${name}: mode 0${mode.toString(8)}: root cannot read`);
    }
  }
  if (v.podSpec.securityContext?.fsGroup !== undefined) out.push('fsGroup makes Secret files group-readable');
  if ((v.container.securityContext?.runAsUser ?? 0) !== 0) out.push('the daemon does not run as root');
  return out;
}

// The policy selects the corral pods; ingress on the API port only, from
// client pods and corral pods; egress to PostgreSQL, the other nodes, DNS
// and the internet but private and link-local ranges.
function policyProblems(b) {
  const v = view(b);
  const spec = b.policy.spec;
  const egressTo = (pred) => (spec.egress ?? []).filter((r) => (r.to ?? []).some(pred));
  const ports = (rules) => rules.flatMap((r) => (r.ports ?? []).map((p) => `${p.protocol}/${p.port}`)).sort();
  const ingress = spec.ingress ?? [];
  const world = egressTo((p) => p.ipBlock?.cidr === '0.0.0.0/0');
  const except = world[0]?.to.find((p) => p.ipBlock)?.ipBlock.except ?? [];
  return problems([
    [selects(spec.podSelector, v.pods), 'the policy does not select the DaemonSet\'s pods'],
    [!selects(spec.podSelector, v.pgPods), 'the policy selects the PostgreSQL pods'],
    [['Egress', 'Ingress'].every((t) => spec.policyTypes?.includes(t)), 'not both Ingress and Egress'],
    [ingress.length === 1 && ports(ingress).join() === `TCP/${v.port}`, `ingress is not TCP/${v.port} only`],
    [ingress.some((r) => r.from?.some((p) => p.podSelector?.matchLabels?.['corral.dev/client'] === 'true')),
     'no ingress from pods labelled corral.dev/client: "true"'],
    [ingress.some((r) => r.from?.some((p) => !p.namespaceSelector && selects(p.podSelector, v.pods))),
     'no ingress from the other corral pods'],
    [!ingress.some((r) => r.from?.some((p) => p.ipBlock)), 'ingress from address ranges'],
    [ports(egressTo((p) => p.podSelector && selects(p.podSelector, v.pgPods))).join() === 'TCP/5432',
     'egress to PostgreSQL is not TCP/5432'],
    [ports(egressTo((p) => p.podSelector && !p.namespaceSelector && selects(p.podSelector, v.pods))).join() ===
     `TCP/${v.port}`, 'egress to the other corral pods is not the API port'],
    [ports(egressTo((p) => p.namespaceSelector?.matchLabels?.['kubernetes.io/metadata.name'] === 'kube-system'))
      .join() === 'TCP/53,UDP/53', 'egress to cluster DNS is not 53 UDP and TCP'],
    [world.length === 1 && world[0].ports === undefined, 'no egress to the internet on any port'],
    [['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16'].every((c) => except.includes(c)),
     'the internet rule does not exclude the private and link-local ranges'],
  ]);
}

describe('deploy/kubernetes against Kubernetes schemas', () => {
  test('every document is a kind this test knows and passes its schema, with no unknown field', async () => {
    assert.ok(objects.length >= 10, `found ${objects.length} objects in ${manifestDir}`);
    const failures = [];
    for (const { file, index, doc } of objects) {
      try {
        await check(doc);
      } catch (e) {
        failures.push(`${file} document ${index + 1} (${typeOf(doc)} ${doc.metadata?.name}): ${e.message}`);
      }
    }
    assert.deepEqual(failures, []);
  });

  test('a kind the test does not know is refused', async () => {
    await assert.rejects(check({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'x' } }),
                         /a kind this test does not know/);
  });

  test('the manifests read the same as YAML 1.1 (kubectl) and YAML 1.2: no octal or yes/no surprises', () => {
    for (const file of new Set(manifests.map((m) => m.file))) {
      const text = readFileSync(join(manifestDir, file), 'utf8');
      assert.deepEqual(parseAll(text, '1.1', file), parseAll(text, '1.2', file), file);
    }
  });

  test('kustomization.yaml lists every manifest but the examples, and nothing else', () => {
    const k = manifests.filter((m) => typeOf(m.doc) === KUSTOMIZATION);
    assert.equal(k.length, 1);
    assert.equal(k[0].file, 'kustomization.yaml');
    const expected = [...new Set(objects.map((m) => m.file))].filter((f) => !f.endsWith('.example.yaml'));
    assert.deepEqual([...k[0].doc.resources].sort(), expected.sort());
    for (const f of k[0].doc.resources) assert.ok(existsSync(join(manifestDir, f)), f);
    assert.equal(k[0].doc.namespace, 'corral');
    const image = view(real).container.image.replace(/:[^/:]+$/, '');
    assert.ok(k[0].doc.images.some((i) => i.name === image), 'kustomization images: names the DaemonSet image');
  });

  test('every object but the Namespace is in namespace corral, which admits privileged pods', () => {
    assert.equal(one('Namespace', 'corral').metadata.labels['pod-security.kubernetes.io/enforce'], 'privileged');
    for (const { file, doc } of objects.filter((m) => m.doc.kind !== 'Namespace'))
      assert.equal(doc.metadata.namespace, 'corral', `${file} ${doc.kind} ${doc.metadata.name}`);
  });
});

describe('the DaemonSet runs corral serve as the design needs', () => {
  const { podSpec, container, serve, mountAt, volume } = view(real);

  test('serve with the ConfigMap, --node-id $(NODE_NAME), --node-address $(POD_IP):7070 from the downward API', () => {
    assert.deepEqual(flagProblems(real), []);
    assert.equal(view(real).argAfter('--node-address'), '$(POD_IP):7070');
  });

  test('readiness is GET /readyz, liveness and startup GET /healthz, on 7070', () => {
    assert.deepEqual(probeProblems(real), []);
    assert.equal(container.readinessProbe.httpGet.port, 7070);
  });

  test('one port everywhere: serve.listen, the container port, the Service\'s targetPort', () => {
    assert.deepEqual(portProblems(real), []);
    assert.equal(real.service.spec.type, 'ClusterIP');
  });

  test('corral.yaml uses only keys docs/config.md documents, and sets what a pod needs', () => {
    assert.ok(documentedKeys.has('state_url_file') && documentedKeys.has('node.lost_after'),
              'the table of docs/config.md was found');
    assert.deepEqual(configKeyProblems(real), []);
    for (const k of ['state_url_file', 'cluster_key_file', 'data_dir', 'listen'])
      assert.ok(serve[k], `serve.${k} is set`);
    assert.ok(serve.api_keys?.files?.length > 0, 'serve.api_keys.files is set');
    assert.equal(serve.node?.id, undefined, 'the node id comes from --node-id, per pod');
    assert.equal(serve.node?.address, undefined, 'the address comes from --node-address, per pod');
    for (const k of ['max_sandboxes', 'memory', 'disk'])
      assert.notEqual(serve.capacity?.[k] ?? 'auto', 'auto', `capacity.${k}: auto reads the host, not the pod`);
  });

  test('the key files are the example Secret\'s keys, mounted by subPath, owner-only, owned by root', () => {
    assert.deepEqual(secretProblems(real), []);
    const mounted = container.volumeMounts.filter((m) => volume(m.name).secret).map((m) => m.subPath).sort();
    assert.deepEqual(Object.keys(real.secret.stringData).sort(), mounted,
                     'the example Secret holds exactly what is mounted');
  });

  test('the image is the Dockerfile\'s: its entrypoint is corral, the tag is pinned', () => {
    const dockerfile = readFileSync(join(repo, 'deploy', 'container', 'Dockerfile'), 'utf8');
    assert.match(dockerfile, /^ENTRYPOINT \["\/usr\/local\/bin\/corral"\]$/m);
    assert.match(dockerfile, /^FROM debian:12 AS build$/m);
    assert.match(dockerfile, /^FROM debian:12-slim$/m);
    assert.match(container.image, /:[0-9][^:/]*$/, 'a version tag, not latest or none');
  });

  test('privileged in the pod\'s own namespaces, no API token, the node\'s data dir and cgroups', () => {
    assert.equal(container.securityContext.privileged, true);
    assert.notEqual(podSpec.hostNetwork, true);
    assert.notEqual(podSpec.hostPID, true);
    assert.notEqual(podSpec.hostIPC, true);
    assert.notEqual(podSpec.hostUsers, false);
    assert.equal(podSpec.automountServiceAccountToken, false);
    assert.equal(podSpec.shareProcessNamespace, true, 'pause is PID 1: sandboxes outlive a container restart');
    const data = mountAt(serve.data_dir);
    assert.equal(data.length, 1, 'serve.data_dir is mounted');
    assert.deepEqual(volume(data[0].name).hostPath, { path: serve.data_dir, type: 'DirectoryOrCreate' });
    const cgroup = mountAt('/sys/fs/cgroup');
    assert.equal(cgroup.length, 1);
    assert.equal(volume(cgroup[0].name).hostPath.path, '/sys/fs/cgroup');
    assert.notEqual(cgroup[0].readOnly, true, 'sandbox cgroups are written');
    assert.ok(volume(mountAt('/run/corral')[0].name).emptyDir, 'the run dir lives as long as the pod');
  });

  test('rolling update one node at a time, old pod first; time for a drained stop; resources set', () => {
    const { updateStrategy } = real.daemonSet.spec;
    assert.equal(updateStrategy.type, 'RollingUpdate');
    assert.equal(updateStrategy.rollingUpdate.maxUnavailable, 1);
    assert.equal(updateStrategy.rollingUpdate.maxSurge, 0);
    assert.ok(podSpec.terminationGracePeriodSeconds >= 60);
    assert.ok(container.resources.requests.cpu && container.resources.requests.memory);
    assert.ok(container.resources.limits.memory);
  });
});

describe('the NetworkPolicy and the example PostgreSQL', () => {
  test('the policy selects the DaemonSet\'s pods: ingress from clients and nodes, egress as designed', () => {
    assert.deepEqual(policyProblems(real), []);
  });

  test('the example Secret\'s state-url names the example database, its port, user and password Secret', () => {
    const url = new URL(real.secret.stringData['state-url']);
    const { postgres, pgService } = real;
    assert.equal(url.protocol, 'postgres:');
    assert.equal(url.hostname, `${pgService.metadata.name}.${pgService.metadata.namespace}.svc`);
    assert.equal(Number(url.port), pgService.spec.ports[0].port);
    assert.ok(selects({ matchLabels: pgService.spec.selector }, view(real).pgPods));
    assert.equal(postgres.spec.serviceName, pgService.metadata.name);
    const c = postgres.spec.template.spec.containers[0];
    assert.match(c.image, /^postgres:15/);
    const env = Object.fromEntries(c.env.map((e) => [e.name, e]));
    assert.equal(url.username, env.POSTGRES_USER.value);
    assert.equal(url.pathname, '/' + env.POSTGRES_DB.value);
    const ref = env.POSTGRES_PASSWORD.valueFrom.secretKeyRef;
    assert.ok(one('Secret', ref.name, 'postgres.example.yaml').stringData[ref.key], 'the password Secret exists');
    assert.equal(postgres.spec.volumeClaimTemplates.length, 1, 'its data is on a PVC');
  });

  test('the examples hold placeholders only, which corral refuses to start with', () => {
    const s = real.secret.stringData;
    assert.match(s['state-url'], /CHANGE-ME/);
    assert.ok(!/^[0-9a-fA-F]{64,}$/.test(s['cluster.key'].split('\n')[0]),
              'the cluster key placeholder is not a usable key');
    const keys = s['api-keys'].split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
    assert.ok(keys.length > 0 && keys.every((k) => /\s/.test(k)), 'no api-keys line is a valid key');
  });
});

describe('negative controls: broken copies are refused', () => {
  const broken = (edit) => {
    const b = structuredClone(real);
    edit(b, b.daemonSet.spec.template.spec, b.daemonSet.spec.template.spec.containers[0]);
    return b;
  };
  const editConfig = (b, from, to) => {
    assert.ok(b.configMap.data['corral.yaml'].includes(from), from);
    b.configMap.data['corral.yaml'] = b.configMap.data['corral.yaml'].replace(from, to);
  };

  test('schema: a string where an integer belongs', async () => {
    const b = broken((_b, _pod, c) => { c.ports[0].containerPort = 'x'; });
    await assert.rejects(check(b.daemonSet), /containerPort must be integer/);
  });

  test('schema: a DaemonSet without its required selector', async () => {
    const b = broken((b) => { delete b.daemonSet.spec.selector; });
    await assert.rejects(check(b.daemonSet), /must have required property '?selector'?/);
  });

  test('strict fields: a misspelt field at the pod, and deep in a probe', async () => {
    const pod = broken((_b, p) => { p.hostNetwrk = true; });
    await assert.rejects(check(pod.daemonSet), /spec\.template\.spec\.hostNetwrk: unknown field/);
    const probe = broken((_b, _p, c) => { c.readinessProbe.httpGet.pth = '/readyz'; });
    await assert.rejects(check(probe.daemonSet), /readinessProbe\.httpGet\.pth: unknown field/);
    const secret = structuredClone(real.secret);
    secret.stringdata = secret.stringData;
    await assert.rejects(check(secret), /Secret\.stringdata: unknown field/);
  });

  test('flags: --node-address without the port, --node-id from the pod name', () => {
    const b = broken((_b, _p, c) => { c.args[c.args.indexOf('--node-address') + 1] = '$(POD_IP)'; });
    assert.match(flagProblems(b).join('\n'), /--node-address is not \$\(POD_IP\):7070/);
    const n = broken((_b, _p, c) => {
      c.env.find((e) => e.name === 'NODE_NAME').valueFrom.fieldRef.fieldPath = 'metadata.name';
    });
    assert.match(flagProblems(n).join('\n'), /NODE_NAME is not/);
  });

  test('probes and ports: another path, a port that is not serve.listen\'s', () => {
    const p = broken((_b, _p, c) => { c.readinessProbe.httpGet.path = '/health'; });
    assert.match(probeProblems(p).join('\n'), /readinessProbe is not GET \/readyz/);
    const s = broken((b) => { b.service.spec.ports[0].targetPort = 8080; });
    assert.match(portProblems(s).join('\n'), /targetPort is not 7070/);
    const l = broken((b) => { editConfig(b, '0.0.0.0:7070', '0.0.0.0:7071'); });
    assert.ok(portProblems(l).length >= 2, 'the container port and the Service no longer match');
    assert.match(flagProblems(l).join('\n'), /--node-address/);
  });

  test('config: a key docs/config.md does not have', () => {
    const b = broken((b) => { editConfig(b, 'lost_after:', 'lost_afer:'); });
    assert.deepEqual(configKeyProblems(b), ['serve.node.lost_afer: not in docs/config.md']);
  });

  test('secrets: group-readable mode, fsGroup, a directory mount, a key missing from the example', () => {
    const mode = broken((_b, p) => { p.volumes.find((v) => v.secret).secret.defaultMode = 0o440; });
    assert.match(secretProblems(mode).join('\n'), /mode 0440 gives group or others access/);
    const group = broken((_b, p) => { p.securityContext = { fsGroup: 1000 }; });
    assert.match(secretProblems(group).join('\n'), /fsGroup/);
    const dir = broken((_b, _p, c) => {
      const m = c.volumeMounts.find((m) => m.subPath === 'cluster.key');
      delete m.subPath;
    });
    assert.match(secretProblems(dir).join('\n'), /cluster\.key is not mounted by subPath/);
    const missing = broken((b) => { delete b.secret.stringData['cluster.key']; });
    assert.match(secretProblems(missing).join('\n'), /Secret key cluster\.key .* not in the example Secret/);
  });

  test('network policy: another pod label, a missing exception, ingress from anywhere', () => {
    const label = broken((b) => { b.policy.spec.podSelector.matchLabels['app.kubernetes.io/name'] = 'corral-node'; });
    assert.match(policyProblems(label).join('\n'), /does not select the DaemonSet's pods/);
    const meta = broken((b) => {
      const block = b.policy.spec.egress.flatMap((r) => r.to).find((p) => p.ipBlock).ipBlock;
      block.except = block.except.filter((c) => c !== '169.254.0.0/16');
    });
    assert.match(policyProblems(meta).join('\n'), /does not exclude/);
    const open = broken((b) => { b.policy.spec.ingress[0].from.push({ ipBlock: { cidr: '0.0.0.0/0' } }); });
    assert.match(policyProblems(open).join('\n'), /ingress from address ranges/);
  });
});
