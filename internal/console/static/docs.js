// The API reference page (GET /docs): Redoc, vendored in the binary,
// renders the OpenAPI document this server serves. Search is off: Redoc
// runs it in a worker made from a blob URL, which the page's
// Content-Security-Policy does not allow.
const root = document.getElementById('redoc');
window.Redoc.init(root.dataset.specUrl, {
  disableSearch: true,
  expandResponses: '200,201',
  hideDownloadButton: false,
  jsonSampleExpandLevel: 3,
}, root, (err) => {
  document.body.dataset.rendered = err ? 'error' : 'yes';
});
