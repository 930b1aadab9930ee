export const description = 'placeholder';
export async function run() { throw new Error('not yet'); }
