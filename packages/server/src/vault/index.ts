export {
  encodeSecretKey,
  generateSecretKey,
  parseSecretKey,
  secretKeyId,
  SECRET_KEY_BYTES,
} from './secret-key.js';
export { isValidKeyId, Keyring, vaultAad } from './keyring.js';
export type { KeyringEntry, Sealed } from './keyring.js';
export {
  addKeyToKeyringFile,
  liteKeyringPath,
  loadKeyring,
  removeKeysFromKeyringFile,
  SECRET_KEY_ENV,
  SECRET_KEY_PREVIOUS_ENV,
  SECRET_KEYRING_FILE_ENV,
} from './load-keyring.js';
export type { KeyringSource, LoadedKeyring, LoadKeyringOptions } from './load-keyring.js';
export { VaultService } from './vault-service.js';
export type {
  ConnectionSummary,
  ConnectionView,
  KeyUsage,
  RotateKeysOptions,
  UnreadableValue,
  VariableView,
  VaultServiceOptions,
} from './vault-service.js';
