// The API reference at /docs: the vendored Swagger UI over this server's /openapi.json.
// Served under the console's Content-Security-Policy, so it talks to this origin only;
// the validator badge (an image from another origin) is off.
/* global SwaggerUIBundle */
window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  validatorUrl: null,
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
});
