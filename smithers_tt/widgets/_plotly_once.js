// The anywidget module (`_esm`) of smithers_tt's plotly figures: plotly's widget bundle
// evaluated once per page and bundle, not once per figure (see _plotly_once.py for why).
//
// The bundle's text arrives as the model's `_plotly_bundle` trait, with its key (plotly's
// version and a hash of the text) as `_plotly_bundle_key`. The first figure of a page imports
// it through a Blob URL, as anywidget imports a module; every later figure of the page with
// the same key awaits that same import. The widget each figure gets is the bundle's default
// export, used as anywidget uses a module's (`loadWidget` in its labextension): a function is
// called once per figure (plotly's keeps the model it initialized), an object is the widget.

const PAGE = "smithers_tt.plotly_bundles"; // globalThis[PAGE]: key -> the import of the bundle

function bundle(model) {
  const key = model.get("_plotly_bundle_key");
  const imports = (globalThis[PAGE] ??= new Map());
  let imported = imports.get(key);
  if (!imported) {
    const text = model.get("_plotly_bundle");
    const url = URL.createObjectURL(new Blob([text], { type: "text/javascript" }));
    imported = import(/* webpackIgnore: true */ url);
    imports.set(key, imported);
    imported.then(
      () => URL.revokeObjectURL(url),
      () => {
        URL.revokeObjectURL(url);
        if (imports.get(key) === imported) imports.delete(key); // the next figure tries again
      },
    );
  }
  return imported;
}

async function widgetOf(module) {
  if (module.render) return { render: module.render }; // anywidget's older form
  if (!module.default) throw new Error("plotly's widget bundle has no default export");
  return typeof module.default === "function" ? await module.default() : module.default;
}

export default () => {
  let widget; // this figure's widget, once the bundle is imported
  return {
    async initialize(context) {
      widget = await widgetOf(await bundle(context.model));
      return widget.initialize?.(context);
    },
    render(context) {
      return widget.render?.(context);
    },
  };
};
