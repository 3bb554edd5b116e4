//! `ioswitch.bench.run`: fio jobs through the ioswitch-bench engine, returning fio's
//! JSON report as Python objects.

use crate::errors;
use ioswitch_bench::jobfile::{JobError, JobSet};
use ioswitch_bench::report::{self, Json};
use ioswitch_bench::run::{self, RunOpts};
use ioswitch_bench::BenchError;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PyString, PyTuple};
use pyo3::IntoPyObjectExt;
use std::path::PathBuf;

/// fio arguments, and what each one is called in messages (the dict key it came from).
struct Args {
    args: Vec<String>,
    names: Vec<String>,
}

impl Args {
    fn push(&mut self, arg: String, name: String) {
        self.args.push(arg);
        self.names.push(name);
    }

    fn job(&mut self, d: &Bound<'_, PyDict>) -> PyResult<()> {
        let name: String = match d.get_item("name")? {
            Some(n) if !n.is_none() => n.str()?.to_string(),
            _ => "job".into(),
        };
        self.push(format!("--name={name}"), format!("job {name:?}"));
        for (k, v) in d.iter() {
            let key: String =
                k.extract().map_err(|_| PyTypeError::new_err("job dict keys must be option names (str)"))?;
            let key = key.trim_start_matches('-').to_string();
            if key == "name" || v.is_none() {
                continue;
            }
            let desc = format!("job {name:?} option {key:?}");
            let arg = if v.is_instance_of::<PyBool>() {
                if v.is_truthy()? {
                    format!("--{key}")
                } else {
                    format!("--{key}=0")
                }
            } else if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
                let parts: Vec<String> =
                    v.try_iter()?.map(|x| x.and_then(|x| Ok(x.str()?.to_string()))).collect::<PyResult<_>>()?;
                format!("--{key}={}", parts.join(":"))
            } else if v.is_instance_of::<PyString>() {
                format!("--{key}={}", v.str()?)
            } else if let Ok(p) = v.extract::<PathBuf>() {
                format!("--{key}={}", p.display())
            } else {
                format!("--{key}={}", v.str()?)
            };
            self.push(arg, desc);
        }
        Ok(())
    }

    /// A message with "command line argument N" replaced by the dict key it came from.
    fn rename(&self, msg: String) -> String {
        let mut msg = msg;
        for (i, name) in self.names.iter().enumerate().rev() {
            let at = format!("command line argument {}", i + 1);
            if let Some(pos) = msg.find(&format!("{at}:")) {
                msg.replace_range(pos..pos + at.len(), name);
            }
        }
        msg
    }
}

fn to_args(job: &Bound<'_, PyAny>) -> PyResult<Args> {
    let mut a = Args { args: Vec::new(), names: Vec::new() };
    if let Ok(d) = job.cast::<PyDict>() {
        a.job(d)?;
    } else if job.is_instance_of::<PyList>() || job.is_instance_of::<PyTuple>() {
        for item in job.try_iter()? {
            let item = item?;
            if let Ok(d) = item.cast::<PyDict>() {
                a.job(d)?;
            } else if let Ok(s) = item.extract::<String>() {
                let n = a.args.len() + 1;
                a.push(s, format!("argument {n}"));
            } else {
                return Err(PyTypeError::new_err("bench.run: a list holds job dicts or fio arguments (str)"));
            }
        }
    } else if let Ok(p) = job.extract::<PathBuf>() {
        a.push(p.display().to_string(), format!("job file {}", p.display()));
    } else {
        return Err(PyTypeError::new_err(
            "bench.run: job must be a dict of fio options, a list of them, a list of fio arguments, or a job file path",
        ));
    }
    Ok(a)
}

fn json_to_py(py: Python<'_>, j: &Json) -> PyResult<Py<PyAny>> {
    Ok(match j {
        Json::Int(v) => v.into_py_any(py)?,
        // As the JSON text: fio prints NaN and infinities as 0.000000.
        Json::Float(v) => (if v.is_finite() { *v } else { 0.0 }).into_py_any(py)?,
        Json::Str(s) => s.into_py_any(py)?,
        Json::Arr(v) => {
            let l = PyList::empty(py);
            for x in v {
                l.append(json_to_py(py, x)?)?;
            }
            l.into_any().unbind()
        }
        Json::Obj(pairs) => {
            let d = PyDict::new(py);
            for (k, v) in pairs {
                d.set_item(k, json_to_py(py, v)?)?;
            }
            d.into_any().unbind()
        }
    })
}

fn job_error(py: Python<'_>, a: &Args, e: JobError) -> PyErr {
    let key = match &e {
        JobError::UnknownOption { name, .. }
        | JobError::BadValue { name, .. }
        | JobError::MissingValue { name, .. } => Some(name.clone()),
        _ => None,
    };
    let msg = a.rename(e.to_string());
    match key {
        Some(k) => errors::make::<errors::BadOptionError>(
            py,
            libc::EINVAL,
            msg,
            &[("key", k.into_py_any(py).unwrap_or_else(|_| py.None()))],
        ),
        None => errors::make::<errors::BenchError>(py, libc::EINVAL, msg, &[("report", py.None())]),
    }
}

/// _bench_run(job, plus=False, check=True) -> dict: see `ioswitch.bench.run`.
#[pyfunction]
#[pyo3(name = "_bench_run", signature = (job, plus = false, check = true))]
pub fn bench_run(py: Python<'_>, job: &Bound<'_, PyAny>, plus: bool, check: bool) -> PyResult<Py<PyAny>> {
    let a = to_args(job)?;
    let set = JobSet::from_args(&a.args).map_err(|e| job_error(py, &a, e))?;
    let result = py.detach(|| {
        let groups = set.group_ids();
        let mut prepared = Vec::with_capacity(set.jobs.len());
        for (spec, &groupid) in set.jobs.iter().zip(&groups) {
            prepared.push(run::prepare(spec, groupid, &mut |_| {})?);
        }
        Ok::<_, BenchError>(run::run(prepared, &RunOpts::default()))
    });
    let rep = result.map_err(|e| {
        errors::make::<errors::BenchError>(py, libc::EINVAL, a.rename(e.to_string()), &[("report", py.None())])
    })?;
    let out = json_to_py(py, &report::json(&rep, &set.global_options, plus))?;
    let failed = report::errors(&rep);
    if check && !failed.is_empty() {
        let msg = failed.join("; ");
        let errno = rep.jobs.iter().flat_map(|j| &j.results).map(|r| r.error).find(|&e| e != 0).unwrap_or(libc::EIO);
        return Err(errors::make::<errors::BenchError>(py, errno, msg, &[("report", out)]));
    }
    Ok(out)
}
