// The API reference page's own script (server/docs.go serves the page):
// it fetches the service's OpenAPI document, points Try it out at the
// origin the page came from, and starts Swagger UI with one plugin of
// ours, which shows each operation's code samples (x-codeSamples).
//
// The page hands it two URLs, as data attributes of #swagger-ui: the
// document's (data-spec) and the API's root (data-api). The page's
// Content-Security-Policy lets it reach the service alone (and the auth
// server's origin, when the document offers OAuth 2): nothing here may
// load from elsewhere.
"use strict";

(function () {
  const root = document.getElementById("swagger-ui");

  // CodeSamples shows an operation's x-codeSamples as tabs, one per
  // language, each with Swagger UI's own code view (highlighting, copy).
  function codeSamplesPlugin(system) {
    const React = system.React;
    const h = React.createElement;

    function CodeSamples(props) {
      const [active, setActive] = React.useState(0);
      const HighlightCode = props.getComponent("HighlightCode", true);
      const sample = props.samples[active] || props.samples[0];
      return h("div", { className: "opblock-section code-samples" },
        h("div", { className: "opblock-section-header" },
          h("div", { className: "tab-header" }, h("h4", { className: "opblock-title" }, "Code samples"))),
        h("div", { className: "code-samples-body" },
          h("ul", { className: "tab", role: "tablist" }, props.samples.map((s, i) =>
            h("li", { key: i, className: "tabitem" + (s === sample ? " active" : ""), role: "presentation" },
              h("button", { className: "tablinks", role: "tab", "aria-selected": s === sample, "data-lang": s.label || s.lang,
                onClick: () => setActive(i) }, s.label || s.lang)))),
          h(HighlightCode, { language: language(sample.lang), canCopy: true, getComponent: props.getComponent }, sample.source)));
    }

    // language names a sample's language as Swagger UI's highlighter does
    // (it knows bash and javascript, and shows the rest plain).
    function language(lang) {
      const l = String(lang || "").toLowerCase();
      if (l === "shell" || l === "sh" || l === "curl") {
        return "bash";
      }
      return l;
    }

    return {
      wrapComponents: {
        // The samples come first in an operation's body, before its
        // parameters.
        parameters: (Original) => function WithCodeSamples(props) {
          const samples = props.operation && props.operation.get("x-codeSamples");
          const list = samples && samples.toJS ? samples.toJS() : [];
          return h("div", null,
            list.length ? h(CodeSamples, { samples: list, getComponent: props.getComponent }) : null,
            h(Original, props));
        },
      },
    };
  }

  // examplesAsText moves the examples of the parameters a reader may
  // leave out into their descriptions. Try it out fills each input with
  // its parameter's example, so it would send every example of an
  // operation at once (page, where, source, q, filter... together, and an
  // Accept that asks /changes for a stream): its form starts empty instead,
  // but for the path's parameters, whose examples name real documents.
  function examplesAsText(spec) {
    const params = Object.values((spec.components || {}).parameters || {});
    for (const item of Object.values(spec.paths || {})) {
      for (const op of Object.values(item)) {
        params.push(...((op && op.parameters) || []).filter((p) => !p.$ref));
      }
    }
    const show = (v) => (v === "" ? "(empty)" : "`" + (typeof v === "string" ? v : JSON.stringify(v)) + "`");
    for (const p of params) {
      if (p.in === "path" || p.required) {
        continue;
      }
      const shown = [];
      if ("example" in p) {
        shown.push(show(p.example));
      }
      for (const [name, ex] of Object.entries(p.examples || {})) {
        shown.push(show(ex.value) + " (" + (ex.summary || name) + ")");
      }
      if (shown.length) {
        p.description = (p.description || "") + "\n\n" + (shown.length > 1 ? "Examples: " : "Example: ") + shown.join(", ");
      }
      delete p.example;
      delete p.examples;
    }
  }

  function start(spec) {
    examplesAsText(spec);
    // Try it out sends its requests where the page came from: the
    // document names the service's public URL, which another name or a
    // proxy in front may not reach from here, nor the page's policy allow.
    spec.servers = [{ url: new URL(root.dataset.api, window.location.href).href, description: "this service" }];
    window.ui = window.SwaggerUIBundle({
      spec: spec,
      domNode: root,
      layout: "BaseLayout",
      presets: [window.SwaggerUIBundle.presets.apis],
      plugins: [codeSamplesPlugin],
      deepLinking: true,
      filter: true,
      displayRequestDuration: true,
      showCommonExtensions: true,
      defaultModelsExpandDepth: 0,
      validatorUrl: null, // its default sends the document to validator.swagger.io
      persistAuthorization: false, // tokens stay in the page, never in storage
      queryConfigEnabled: false, // the page's URL configures nothing
    });
  }

  fetch(root.dataset.spec, { headers: { Accept: "application/json" } })
    .then((res) => {
      if (!res.ok) {
        throw new Error(res.status + " " + res.statusText);
      }
      return res.json();
    })
    .then(start)
    .catch((err) => {
      root.textContent = "The API's description could not be loaded (" + err.message + "): " + root.dataset.spec;
    });
})();
