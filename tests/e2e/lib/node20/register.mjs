// node --import ./register.mjs: installs ./hooks.mjs (see ./fs.mjs).
import { register } from 'node:module';

register('./hooks.mjs', import.meta.url);
