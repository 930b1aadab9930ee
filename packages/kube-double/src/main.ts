// `kube-double --port N [--admin-token T] [--http] [--kubeconfig PATH]`: serves until SIGINT/SIGTERM.
import { dirname, basename } from 'node:path';
import { parseArgs } from 'node:util';
import { startKubeDouble } from './double.js';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    host: { type: 'string', default: '127.0.0.1' },
    'admin-token': { type: 'string' },
    http: { type: 'boolean', default: false },
    kubeconfig: { type: 'string' },
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
// One line on stdout a supervising process can parse; the admin token is not printed.
process.stdout.write(
  `${JSON.stringify({ url: double.url, kubeconfig: values.kubeconfig ?? null })}\n`,
);
const stop = () => {
  void double.close().then(() => process.exit(0));
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
