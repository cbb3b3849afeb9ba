// esbuild bundles CSS imports into app.css.
declare module "*.css";
