/**
 * The owner of every object is a hash of the API key that created it, so keys are never stored and one key's files
 * and batches are invisible to another: the first 32 hex digits of the key's sha256 (config/keys.ts derives it, as
 * the keys file's hashes give it too).
 */
export { ownerOfSecret as ownerOf } from "../config/keys.js";
