// After dynamic registration: tell the platform's page that opened the registration (its
// parent frame, or the window that opened this one) that the tool is done, so it closes the
// registration's frame or window (LTI Dynamic Registration 1.0, org.imsglobal.lti.close).
const platform = window.opener || (window.parent !== window ? window.parent : null);
if (platform) {
  platform.postMessage({ subject: "org.imsglobal.lti.close" }, "*");
}
