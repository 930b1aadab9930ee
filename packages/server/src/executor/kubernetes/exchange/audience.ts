/**
 * The audience every exchange token is projected for and reviewed against. Its own module so
 * the pod builder and the exchange name it without loading the Kubernetes client.
 */
export const EXCHANGE_AUDIENCE = 'leoflow-control-plane';
