// `kube-double --port N [--admin-token T] [--http] [--kubeconfig PATH]
//              [--node NAME --image-map FILE.json --work-root DIR]`
// Serves until SIGINT/SIGTERM. With --node, a kubelet simulator registers that node and runs the
// pods bound to it; the image map is a JSON object of image → ImageSpec (see kubelet.ts).
import { readFileSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { parseArgs } from 'node:util';
import { startKubeDouble } from './double.js';
import { startKubelet, type ImageSpec } from './kubelet.js';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    host: { type: 'string', default: '127.0.0.1' },
    'admin-token': { type: 'string' },
    http: { type: 'boolean', default: false },
    kubeconfig: { type: 'string' },
    node: { type: 'string' },
    'image-map': { type: 'string' },
    'work-root': { type: 'string' },
  },
});

const double = await startKubeDouble({
  port: Number(values.port),
  host: values.host,
  adminToken: values['admin-token'],
  tls: !values.http,
});
if (values.kubeconfig !== undefined) {
  double.kubeconfig(dirname(values.kubeconfig), { file: basename(values.kubeconfig) });
}
const kubelet =
  values.node === undefined
    ? undefined
    : startKubelet({
        double,
        nodeName: values.node,
        workRoot: values['work-root'] ?? `${process.cwd()}/kube-double-pods`,
        imageMap:
          values['image-map'] === undefined
            ? {}
            : (JSON.parse(readFileSync(values['image-map'], 'utf8')) as Record<string, ImageSpec>),
      });
// One line on stdout a supervising process can parse; the admin token is not printed.
process.stdout.write(
  `${JSON.stringify({ url: double.url, kubeconfig: values.kubeconfig ?? null, node: values.node ?? null })}\n`,
);
const stop = () => {
  void (async () => {
    await kubelet?.stop();
    await double.close();
    process.exit(0);
  })();
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
