// The web console's overview with a long list, painted and timed in the browser: shared by the browser test (which
// checks it and records the figure) and bench/console-screens.mjs (which times it on a quiet machine). The list is
// one real deployment's entry repeated, served by the browser's own interception: creating 1,000 deployments would
// measure the engine, not the console.

/** Answers the page's `GET /api/deployments` with `count` copies of `real` (a deployment's list entry). */
export function serveManyDeployments(page, real, count = 1000) {
  const body = JSON.stringify({ data: Array.from({ length: count }, (_, i) => ({ ...real, name: `d${String(i).padStart(4, '0')}` })) });
  return page.route('**/api/deployments', (route) => route.fulfill({ status: 200, contentType: 'application/json', body }));
}

/**
 * Opens the Plans screen, then clicks through to the overview and waits until the browser painted its first 100
 * rows and the count of `count`. Resolves with the ms from the click to that paint (`total`) and from the last byte
 * of the list's answer to it (`render`).
 */
export async function timeListPaint(page, baseUrl, count = 1000) {
  await page.goto(new URL('/plans', baseUrl).href);
  await page.locator('h1:text("Plans")').waitFor();
  return page.evaluate(async (expected) => {
    performance.clearResourceTimings();
    const started = performance.now();
    document.querySelector('a[href="/"]').click();
    await new Promise((resolve) => {
      const check = () =>
        document.querySelectorAll('tbody tr').length >= 100 && document.querySelector('h2')?.textContent === `Deployments (${expected})`
          ? resolve()
          : requestAnimationFrame(check);
      check();
    });
    // Until the browser painted it.
    await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
    const done = performance.now();
    const answer = performance.getEntriesByType('resource').find((e) => e.name.endsWith('/api/deployments'));
    return { total: done - started, render: done - answer.responseEnd };
  }, count);
}
