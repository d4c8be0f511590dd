// The LTI login and launch inside a platform's iframe when the browser keeps no third-party
// cookie: the platform's storage stands in for it (LTI client-side postMessages, lti-cs-oidc,
// with the platform storage of lti-pm-s).
//
// <main data-lti-storage="put">: the login puts its secret in the platform's storage under its
//   key, then goes on to the platform's sign-in (data-next). If the platform does not answer,
//   it goes on all the same: the login's partitioned cookie may still carry the launch.
// <main data-lti-storage="get">: the launch reads the secret back and posts the launch again
//   with it (#lti-storage-launch), from this page, so the server sees this tool's own origin.
//   If the platform does not answer, the page says so and offers a window of its own.
//
// Messages go to the frame the platform named (lti_storage_target: "_parent" or a frame of the
// parent window), only to the platform's origin, and only its answers from that origin count.

const ANSWER_TIMEOUT_MS = 3000;

/** The data attributes of <main data-lti-storage> (templates/lti_storage.html): storageValue and
 * next are there with "put" only, the one mode that reads them.
 * @typedef {{ storageTarget: string, storageOrigin: string, storageKey: string,
 *   storageValue: string, next: string }} StorageData */

/** @param {string} target @returns {Window | null} */
function storageWindow(target) {
  if (window.parent === window) {
    return null; // not framed: there is no platform page to ask
  }
  if (target === "_parent") {
    return window.parent;
  }
  try {
    // A frame by its name: the window's named properties, which its type does not list.
    const frames = /** @type {Window & Record<string, Window | undefined>} */ (window.parent.frames);
    return frames[target] || null;
  } catch {
    return null;
  }
}

function messageId() {
  if (window.crypto && typeof window.crypto.randomUUID === "function") {
    return window.crypto.randomUUID();
  }
  return `${Date.now()}-${Math.random().toString(16).slice(2)}`;
}

// Posts one message and resolves with the platform's answer (its data), or rejects with why not.
/** @param {string} target @param {string} origin
 * @param {{ subject: string, key?: string, value?: string }} message
 * @returns {Promise<{ value?: unknown }>} */
function ask(target, origin, message) {
  return new Promise((resolve, reject) => {
    const frame = storageWindow(target);
    if (!frame || !origin) {
      reject(new Error("no platform storage to ask"));
      return;
    }
    const id = messageId();
    const expected = `${message.subject}.response`;
    const timer = window.setTimeout(() => {
      window.removeEventListener("message", listen);
      reject(new Error("the platform did not answer"));
    }, ANSWER_TIMEOUT_MS);
    /** @param {MessageEvent} event */
    function listen(event) {
      const data = event.data;
      if (event.origin !== origin || !data || data.message_id !== id || data.subject !== expected) {
        return;
      }
      window.clearTimeout(timer);
      window.removeEventListener("message", listen);
      if (data.error) {
        reject(new Error(String(data.error.message || data.error.code || "refused")));
      } else {
        resolve(data);
      }
    }
    window.addEventListener("message", listen);
    frame.postMessage({ ...message, message_id: id }, origin);
  });
}

/** @param {string} text */
function status(text) {
  const line = document.getElementById("lti-storage-status");
  if (line) {
    line.textContent = text;
  }
}

/** @param {HTMLElement} main */
async function putThenContinue(main) {
  const { storageTarget, storageOrigin, storageKey, storageValue, next } =
    /** @type {StorageData} */ (main.dataset);
  try {
    await ask(storageTarget, storageOrigin, {
      subject: "lti.put_data",
      key: storageKey,
      value: storageValue,
    });
  } catch {
    // Going on all the same: the login's cookie may be kept (a partitioned one usually is).
  }
  window.location.replace(next);
}

/** @param {HTMLElement} main */
async function getThenLaunch(main) {
  const { storageTarget, storageOrigin, storageKey } = /** @type {StorageData} */ (main.dataset);
  const form = /** @type {HTMLFormElement} */ (document.getElementById("lti-storage-launch"));
  try {
    const answer = await ask(storageTarget, storageOrigin, { subject: "lti.get_data", key: storageKey });
    if (typeof answer.value !== "string" || !answer.value) {
      throw new Error("nothing kept under the login's key");
    }
    /** @type {HTMLInputElement} */ (form.elements.namedItem("storage_secret")).value = answer.value;
    form.submit();
  } catch {
    status("This launch could not be confirmed in this frame.");
    /** @type {HTMLElement} */ (document.getElementById("lti-storage-failed")).hidden = false;
  }
}

const main = /** @type {HTMLElement | null} */ (document.querySelector("[data-lti-storage]"));
if (main && main.dataset.ltiStorage === "put") {
  putThenContinue(main);
} else if (main && main.dataset.ltiStorage === "get") {
  getThenLaunch(main);
}
