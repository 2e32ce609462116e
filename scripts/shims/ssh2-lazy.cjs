// Bundled in place of `ssh2`: docker-modem requires it when it loads, for `ssh://` engine hosts only, and loading
// ssh2 starts a 16 MB WebAssembly memory (its Poly1305). The real module is loaded when a client is created.
const id = 'ssh2'; // a computed name: the bundler leaves this require to run time
let real;
const load = () => (real ??= require(id));

class Client {
  constructor(...args) {
    return new (load().Client)(...args);
  }
}

module.exports = { Client };
