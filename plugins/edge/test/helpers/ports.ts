export { freePort, waitFor } from '../../../../test/helpers/net.js';
