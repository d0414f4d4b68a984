// The test's MCP Apps host: the official app-bridge, an iframe sandboxed as hosts do (scripts,
// no same-origin) under the spec's default CSP, and tools/call relayed to a real loomgate-mcp
// through `window.relayToolCall` (the test's Python side, which holds the MCP client).
import { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";

// The CSP a host puts on an app that declared no domains (the ext-apps specification's default).
const DEFAULT_CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; " +
  "img-src data:; media-src data:; font-src data:; connect-src 'none'; frame-src 'none'; " +
  "base-uri 'none'; form-action 'none'";

window.hostLog = [];

window.startHost = async ({ html, toolName, toolInput, toolResult, theme }) => {
  const iframe = document.createElement("iframe");
  iframe.id = "app";
  iframe.setAttribute("sandbox", "allow-scripts allow-forms");
  iframe.style.cssText = "width: 100%; height: 900px; border: 0";
  document.body.append(iframe);
  const bridge = new AppBridge(
    null,
    { name: "loomgate-test-host", version: "1.0.0" },
    { serverTools: {}, serverResources: {}, openLinks: {} },
    { hostContext: { theme, displayMode: "inline", platform: "web" } },
  );
  bridge.oncalltool = async (params) => {
    window.hostLog.push(params.name);
    return JSON.parse(await window.relayToolCall(JSON.stringify(params)));
  };
  const initialized = new Promise((resolve) => { bridge.oninitialized = resolve; });
  await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
  const csp = `<meta http-equiv="Content-Security-Policy" content="${DEFAULT_CSP}">`;
  iframe.srcdoc = html.replace(/<head>/i, "<head>" + csp);
  await initialized;
  await bridge.sendToolInput({ arguments: toolInput });
  await bridge.sendToolResult(toolResult);
  window.hostBridge = bridge;
  window.hostTool = toolName;
};

window.setTheme = (theme) => window.hostBridge.setHostContext({ theme });
